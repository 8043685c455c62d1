# swa-short-prev-prefix-frees-tree-slots (design deviation, OWN)
# target: properties.upstream:sglang_swa_radix_cache_rust
"""Counterexample found by prefixcache.

[OWN] insert frees exactly the caller's duplicates (full and SWA) at step 3:
Finish(req=1, hold=False, prev_zero=True)
  expected: ([], [])
  observed: ([1], [1])
"""
from properties.families.sglang.targets import open_target

PAGE, SIZE, SPEC = 1, 1, 'properties.upstream:sglang_swa_radix_cache_rust'
tree = open_target('properties.upstream:sglang_swa_radix_cache_rust').create(1, 1, 1, 1)
requests = []

def arrive(tokens, extra_key=None):
    """match, lock the match, evict if short, alloc the rest of the page-aligned tokens."""
    matched, node, slots = tree.match(tokens, extra_key)
    lock = tree.lock(node) if matched else None
    need = len(tokens) // PAGE * PAGE - matched
    full, swa = tree.available_size(), tree.swa_available_size()
    if full < need or swa < need:
        print("evict", tree.evict(max(0, need - full), max(0, need - swa)))
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

# step 0: Arrive(tokens=(0,), extra_key=None)
arrive([0])
# step 1: Finish(req=0, hold=False, prev_zero=False)
finish(0)
# step 2: Arrive(tokens=(0,), extra_key=None)
arrive([0])
# step 3: Finish(req=1, hold=False, prev_zero=True)
finish(1, prev_zero=True)
# what the judge reads after every step: the free list and the sizes
print('free slots', sorted(tree.free_slots().elements()))
print('evictable, protected, total', tree.sizes())
print('free SWA slots', sorted(tree.swa_free_slots().elements()))
print('swa evictable, protected', tree.swa_sizes())

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:sglang_swa_radix_cache_rust',
          {'pages': 1, 'page_size': 1, 'window': 1, 'swa_pages': 1}, [
        {'op': 'arrive', 'tokens': [0]},
        {'op': 'finish', 'req': 0},
        {'op': 'arrive', 'tokens': [0]},
        {'op': 'finish', 'req': 1, 'prev_zero': True},
    ], family='properties.families.sglang.family:FAMILY')
