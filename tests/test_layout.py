"""The kernel folder holds jittable kernels only: nothing in ``jaxseg/_src`` imports host code.

Host code (the Evaluator, padding, file reading, reports, pictures, the demo, the CLI) lives in
``jaxseg/_host`` and calls the kernels; the reverse dependency would pull numpy I/O and
matplotlib into the functions users jit.
"""

import ast
import io
import pathlib
import re
import tokenize

import jaxseg

_PACKAGE = pathlib.Path(jaxseg.__file__).parent


def _imported_modules(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_kernels_never_import_host_code():
    kernels = sorted((_PACKAGE / "_src").glob("*.py"))
    assert kernels, "no kernel modules found"
    offending = {
        path.name: name
        for path in kernels
        for name in _imported_modules(path)
        if name.startswith("jaxseg._host") or name in {"matplotlib", "argparse"}
    }
    assert not offending, offending


def test_host_modules_are_not_in_the_kernel_folder():
    host = {path.name for path in (_PACKAGE / "_host").glob("*.py")} - {"__init__.py"}
    assert {"evaluator.py", "cli.py", "io_files.py"} <= host
    assert not host & {path.name for path in (_PACKAGE / "_src").glob("*.py")}


def test_no_kernel_function_is_longer_than_80_lines():
    # Counted from ``def`` to the last line, docstring included: a function that needs more is
    # two functions, or its docstring says more than its Args and Returns need.
    longest = {
        f"{path.name}:{node.lineno} {node.name}": node.end_lineno - node.lineno + 1
        for path in sorted((_PACKAGE / "_src").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert longest, "no kernel functions found"
    too_long = {name: lines for name, lines in longest.items() if lines > 80}
    assert not too_long, too_long


# A duration (ms, us, s after a decimal number) or a speed-up factor ("2x faster", "3-4x more").
_TIMING = re.compile(
    r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:ms|us|µs)\b"
    r"|\b\d+\.\d+(?:-\d+(?:\.\d+)?)? ?s\b"
    r"|\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x (?:faster|slower|more|less)\b"
    r"|\d+% (?:faster|slower)"
)


def _comments_and_docstrings(path):
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                yield node.body[0].lineno, docstring


def test_comments_say_why_and_leave_timings_to_the_benchmarks():
    # Timings drift with the machine and the code; benchmarks/README.md keeps the current ones
    # (and, for choices measured once, the numbers behind them).
    timed = {
        f"{path.relative_to(_PACKAGE)}:{line}": match.group(0)
        for path in sorted(_PACKAGE.rglob("*.py"))
        for line, text in _comments_and_docstrings(path)
        for match in [_TIMING.search(text)]
        if match
    }
    assert not timed, timed
