# finish-keeps-outputs-with-prompt (design deviation, EVICT)
# target: properties.upstream:sglang_v0518_request_radix_cache
"""Counterexample found by prefixcache.

[EVICT] evict(1) frees the least recently used unlocked leaves at step 4: Evict(num_tokens=1, swa_num_tokens=0)
  expected: [2]
  observed: [1, 2]
"""
from properties.families.sglang.targets import open_target

PAGE, SIZE, SPEC = 1, 2, 'properties.upstream:sglang_v0518_request_radix_cache'
tree = open_target('properties.upstream:sglang_v0518_request_radix_cache').create(2, 1)
requests = []

def arrive(tokens, extra_key=None):
    """match, lock the match, evict if short, alloc the rest of the page-aligned tokens."""
    matched, node, slots = tree.match(tokens, extra_key)
    lock = tree.lock(node) if matched else None
    need = len(tokens) // PAGE * PAGE - matched
    if tree.available_size() < need:
        print("evict", tree.evict(need - tree.available_size()))
    fresh = tree.alloc(need) if need else []
    if fresh is None:
        if lock is not None:
            tree.unlock(lock)
        requests.append(None)
    else:
        requests.append([tokens, extra_key, matched, slots + fresh, lock])
    print("arrive", matched, requests[-1] and requests[-1][3])


def finish(req, hold=False, prev_zero=False):
    """insert with prev_prefix_len = the match, unlock; hold: lock the inserted node."""
    tokens, extra_key, matched, slots, lock = requests[req]
    aligned = tokens[: len(tokens) // PAGE * PAGE]
    if aligned:
        print("insert", tree.insert(aligned, slots, extra_key, 0 if prev_zero else matched))
    if lock is not None:
        tree.unlock(lock)
    requests[req][4] = None
    if hold:
        matched, node, _ = tree.match(tokens, extra_key)
        requests[req][4] = tree.lock(node) if matched else None


def unlock(req):
    tree.unlock(requests[req][4])
    requests[req][4] = None

holds = []


def take(n):
    """a bare alloc(n): a hold, numbered when granted."""
    got = tree.alloc(n)
    if got is not None:
        holds.append(got)
    print("alloc", got)


def extend(hold, tokens, decode):
    """the hold's KV row grows by alloc_extend (or alloc_decode: one token)."""
    row = holds[hold]
    if decode:
        got = tree.alloc_decode(len(row) + 1, row[-1])
    else:
        got = tree.alloc_extend(len(row), len(row) + tokens, row[-1])
    if got is not None:
        row.extend(got)
    print("extend", got)


def give(hold, how):
    """the hold's slots back: free, free_segment from 0, or two frees in one free group."""
    slots, holds[hold] = holds[hold], None
    if how == "segment":
        tree.free_segment(slots, 0)
    elif how == "group":
        cut = len(slots) // PAGE // 2 * PAGE
        tree.free_group([slots[:cut], slots[cut:]])
    else:
        tree.free(slots)


def probe(setup, misuse):
    """a misuse on a fresh tree; what changed."""
    where = {"tree": open_target(SPEC).create(SIZE, PAGE)}
    exec("\n".join(setup), where)

    def state():
        tree = where["tree"]
        return sorted(tree.free_slots().elements()), tree.available_size(), tree.sizes()

    before = state()
    try:
        exec(misuse, where)
    except Exception as exc:
        print("probe raised", repr(exc))
    print("probe", misuse, before, "->", state())

handles = []


def make_room(req, tokens):
    """evict what the free slots lack for `tokens` more positions of the row."""
    have = len(tree.req_row(handles[req]))
    need = (-(-(have + tokens) // PAGE) - -(-have // PAGE)) * PAGE
    if tree.available_size() < need:
        print("evict", tree.evict(need - tree.available_size()))


def admit(tokens, extra_key=None):
    """a new request: match its prompt, lock the match, take a row."""
    handles.append(tree.req_open(tokens, extra_key))
    print("admit", tree.req_admit(handles[-1]))


def chunk(req, tokens, publish):
    """a prefill chunk (at most what is left), then checkpoint(req, up_to=computed)."""
    left = len(tree.req_tokens(handles[req])) - len(tree.req_row(handles[req]))
    make_room(req, min(tokens, left))
    got = tree.req_extend(handles[req], min(tokens, left))
    print("chunk", got)
    if got is not None and publish:
        tree.req_checkpoint(handles[req])


def decode(req, token):
    make_room(req, 1)
    print("decode", tree.req_decode(handles[req], token))


def preempt(req):
    tree.req_release(handles[req], False)


def resume(req):
    print("resume", tree.req_admit(handles[req]))


def complete(req):
    tree.req_release(handles[req], True)

# step 0: Admit(tokens=(0,), extra_key=None)
admit([0])
# step 1: Chunk(req=0, tokens=1, publish=False)
chunk(0, 1, False)
# step 2: Decode(req=0, token=0)
decode(0, 0)
# step 3: Complete(req=0)
complete(0)
# step 4: Evict(num_tokens=1, swa_num_tokens=0)
print('evict', tree.evict(1))
# what the judge reads after every step: the free list and the sizes
print('free slots', sorted(tree.free_slots().elements()))
print('evictable, protected, total', tree.sizes())

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:sglang_v0518_request_radix_cache', {'pages': 2, 'page_size': 1}, [
        {'op': 'admit', 'tokens': [0]},
        {'op': 'chunk', 'req': 0, 'tokens': 1, 'publish': False},
        {'op': 'decode', 'req': 0, 'token': 0},
        {'op': 'complete', 'req': 0},
        {'op': 'evict', 'num_tokens': 1},
    ], family='properties.families.sglang.family:FAMILY')
