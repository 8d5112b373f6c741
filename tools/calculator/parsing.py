"""From text to a checked AST: the × ÷ − ^ and n! spellings rewritten, the source parsed, and the
size, depth and whitelist bounds enforced before anything is computed."""

import ast
import math
import re

from tools.calculator.bounds import MAX_DEPTH, MAX_NODES
from tools.calculator.functions import CONSTANTS, FUNCTIONS, SUPPORTED, Function
from tools.errors import ToolInputError, ToolLimitError

_UNICODE_OPERATORS = str.maketrans({"×": "*", "÷": "/", "−": "-"})
# Only a bare integer literal takes a postfix "!"; "!=" is left alone so it reports as a comparison.
_POSTFIX_FACTORIAL = re.compile(r"(?<![\w.])(\d+)!(?!=)")
_HINTS = {"pow": "; write x ** y or x ^ y", "power": "; write x ** y or x ^ y"}


def check_paren_depth(text: str) -> None:
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise ToolLimitError(
            f"the expression nests parentheses {deepest} deep; the limit is {MAX_DEPTH}. "
            "Remove redundant parentheses or split the calculation into steps."
        )


def parse_expression(text: str) -> ast.Expression:
    source = text.translate(_UNICODE_OPERATORS).replace("^", "**")
    source = _POSTFIX_FACTORIAL.sub(r"factorial(\1)", source)
    try:
        return ast.parse(source, mode="eval")
    except (SyntaxError, ValueError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        raise ToolInputError(
            f"could not parse '{text}' ({reason}); write a plain arithmetic expression such as "
            f"'(2 + 3) * 4'. Supported: {SUPPORTED}."
        ) from None


def check_tree(root: ast.expr) -> None:
    """Enforce the node-count and depth bounds and the whitelist before anything is computed."""
    count = 0
    pending: list[tuple[ast.expr, int]] = [(root, 1)]
    while pending:
        node, depth = pending.pop()
        count += 1
        if count > MAX_NODES:
            raise ToolLimitError(
                f"the expression has more than {MAX_NODES} numbers and operations; "
                "split the calculation into smaller steps."
            )
        if depth > MAX_DEPTH:
            raise ToolLimitError(
                f"the expression nests operations more than {MAX_DEPTH} deep; "
                "simplify it or split the calculation into steps."
            )
        for operand in _operands(node):
            # A left operand continues a chain such as 1 + 2 + 3 rather than nesting deeper;
            # the node-count bound already keeps such chains (and the recursion over them) short.
            chained = isinstance(node, ast.BinOp) and operand is node.left
            pending.append((operand, depth if chained else depth + 1))


def _operands(node: ast.expr) -> list[ast.expr]:
    """The operands of a whitelisted node; anything else is refused here."""
    match node:
        case ast.Constant(value=bool()):
            pass
        case ast.Constant(value=float() as value) if not math.isfinite(value):
            raise ToolLimitError(
                f"the number '{snippet(node)}' is too large for floating point (above about "
                "1.8e308); use smaller numbers."
            )
        case ast.Constant(value=int() | float()):
            return []
        case ast.UnaryOp(op=ast.UAdd() | ast.USub()):
            return [node.operand]
        case ast.BinOp(op=ast.Add() | ast.Sub() | ast.Mult() | ast.Div()):
            return [node.left, node.right]
        case ast.BinOp(op=ast.FloorDiv() | ast.Mod() | ast.Pow()):
            return [node.left, node.right]
        case ast.Name(id=name) if name in CONSTANTS:
            return []
        case ast.Call(func=ast.Name(id=name)) if name in FUNCTIONS:
            _check_call(name, node)
            return list(node.args)
    raise ToolInputError(
        f"unsupported {_describe(node)} in the expression; only arithmetic and the listed "
        f"functions are allowed. Supported: {SUPPORTED}."
    )


def _check_call(name: str, node: ast.Call) -> None:
    spec = FUNCTIONS[name]
    if (
        spec.min_args <= len(node.args) <= spec.max_args
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    ):
        return
    raise ToolInputError(
        f"invalid call '{snippet(node)}': {name} takes {_arity(spec)} (positional, no "
        f"keywords or *), as in {spec.usage}"
    )


def _arity(spec: Function) -> str:
    words = {1: "one", 2: "two"}
    if spec.min_args == spec.max_args:
        plural = "argument" if spec.min_args == 1 else "arguments"
        return f"exactly {words[spec.min_args]} {plural}"
    if spec.max_args == spec.min_args + 1:
        return f"{words[spec.min_args]} or {words[spec.max_args]} arguments"
    return f"{spec.min_args} to {spec.max_args} arguments"


def _describe(node: ast.AST) -> str:
    match node:
        case ast.Name(id=name) if name in FUNCTIONS:
            return f"name '{name}' (a function: call it as {FUNCTIONS[name].usage})"
        case ast.Name(id=name):
            return f"name '{name}' (variables are not available; the constants are pi, e and tau)"
        case ast.Call(func=ast.Name(id=name)):
            return (
                f"function call '{snippet(node)}' ('{name}' is not an available function"
                f"{_HINTS.get(name, '')})"
            )
        case ast.Call():
            return f"function call '{snippet(node)}'"
        case ast.Attribute(attr=attr):
            return f"attribute access '.{attr}'"
        case ast.Constant(value=str() | bytes()):
            return f"string {snippet(node)}"
        case ast.Constant(value=complex()):
            return f"complex number '{snippet(node)}'"
        case ast.Constant():
            return f"constant '{snippet(node)}'"
        case ast.Tuple():
            return (
                f"comma in '{snippet(node)}' (write numbers without thousands separators, "
                "e.g. 1000000)"
            )
        case ast.Compare():
            return f"comparison '{snippet(node)}'"
        case ast.BoolOp() | ast.UnaryOp(op=ast.Not()):
            return f"boolean operator in '{snippet(node)}'"
        case ast.BinOp() | ast.UnaryOp():
            return f"operator in '{snippet(node)}'"
    return f"{type(node).__name__} '{snippet(node)}'"


def snippet(node: ast.AST, limit: int = 80) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."
