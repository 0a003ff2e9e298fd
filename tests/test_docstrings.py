"""Runs the ``>>>`` examples of every module under jaxseg/ as doctests."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import jaxseg

OPTIONS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def _module_names():
    names = [jaxseg.__name__]
    for info in pkgutil.walk_packages(jaxseg.__path__, prefix="jaxseg."):
        if info.name.endswith("__main__"):
            continue  # runs the CLI on import
        names.append(info.name)
    return sorted(names)


def _import(name):
    pictures = ("jaxseg.plot", "jaxseg._host.plotting")
    if name in pictures and importlib.util.find_spec("matplotlib") is None:
        pytest.skip("jaxseg.plot needs the optional matplotlib")
    return importlib.import_module(name)


@pytest.mark.parametrize("name", _module_names())
def test_doctests(name):
    module = _import(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name} (see stdout)"
