"""Device, cdiv, chunk_list, the error hierarchy and the package surface."""

from __future__ import annotations

import pytest

import prefixcache
from prefixcache import errors, interfaces, utils
from prefixcache.interfaces import BlockAllocator
from prefixcache.utils import Device, cdiv, chunk_list


def test_device_enum_values_and_lookup() -> None:
    assert Device.GPU.value == 1
    assert Device.CPU.value == 2
    assert Device["GPU"] is Device.GPU
    assert Device["cpu".upper()] is Device.CPU
    assert interfaces.Device is utils.Device


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(0, 4, 0), (1, 4, 1), (4, 4, 1), (5, 4, 2), (-7, 8, 0), (-8, 8, -1), (-9, 8, -1), (17, 1, 17)],
)
def test_cdiv_is_exact_ceiling(a: int, b: int, expected: int) -> None:
    assert cdiv(a, b) == expected


def test_chunk_list_splits_in_order() -> None:
    assert chunk_list([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert chunk_list([], 3) == []
    assert list(chunk_list(range(4), 4)) == [[0, 1, 2, 3]]
    with pytest.raises(errors.InvalidArgumentError):
        chunk_list([1], 0)


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (errors.NoFreeBlocksError, ValueError),
        (errors.InvalidArgumentError, ValueError),
        (errors.InvalidBlockError, ValueError),
        (errors.UnknownBlockIdError, KeyError),
        (errors.UnknownBlockIdError, ValueError),
        (errors.DoubleFreeError, AssertionError),
        (errors.DoubleFreeError, errors.InvalidBlockError),
        (errors.ForkError, errors.InvalidBlockError),
        (errors.BlockFullError, ValueError),
        (errors.ImmutableBlockError, ValueError),
        (errors.SwapError, ValueError),
        (errors.UnknownDeviceError, KeyError),
    ],
)
def test_error_classes_inherit_the_builtin_upstream_expects(
    cls: type[Exception], builtin: type[Exception]
) -> None:
    assert issubclass(cls, errors.PrefixCacheError)
    assert issubclass(cls, builtin)


def test_no_free_blocks_error_is_the_nested_interface_name() -> None:
    assert BlockAllocator.NoFreeBlocksError is errors.NoFreeBlocksError
    assert prefixcache.PrefixCachingBlockAllocator.NoFreeBlocksError is errors.NoFreeBlocksError


def test_key_error_subclasses_print_plain_messages() -> None:
    assert str(errors.UnknownDeviceError("no such device")) == "no such device"
    assert str(errors.UnknownBlockIdError("id 7")) == "id 7"


def test_package_exports_everything_it_lists() -> None:
    assert prefixcache.__version__ == "0.1.0"
    for name in prefixcache.__all__:
        assert hasattr(prefixcache, name), name
