"""calc.evaluate: a safe arithmetic evaluator.

The expression is parsed with `ast` and only numbers, + - * / // % **, parentheses and a
small list of math functions and constants are evaluated; names, attributes, subscripts,
strings, comprehensions and every other construct are refused. There is no eval() or exec().
Powers and factorials are bounded so a call cannot exhaust memory or time.
"""

import ast
import json
import math
import sys

MAX_LENGTH = 500
MAX_DEPTH = 60
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 10 ** 1000

FUNCTIONS = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "floor": math.floor, "ceil": math.ceil,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos,
    "atan": math.atan, "exp": math.exp, "ln": math.log, "log": math.log, "log10": math.log10,
    "log2": math.log2, "min": min, "max": max, "hypot": math.hypot, "gcd": math.gcd,
}
CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}

# Full-width and typographic symbols written in Chinese text.
REPLACEMENTS = {
    "×": "*", "✕": "*", "·": "*", "÷": "/", "（": "(", "）": ")", "＋": "+", "－": "-",
    "−": "-", "＊": "*", "／": "/", "＾": "^", "％": "%", "，": ",", "。": ".", "√": "sqrt",
}


class CalcError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def prepare(expression):
    text = "".join(REPLACEMENTS.get(c, c) for c in expression)
    text = text.replace("^", "**").strip().rstrip("=").strip()
    # `50%` alone or before an operator means 0.5; `a % b` stays the remainder.
    out = []
    for i, c in enumerate(text):
        nxt = text[i + 1:].lstrip()[:1]
        if c == "%" and (nxt == "" or nxt in "+-*/)"):
            out.append("/100")
        else:
            out.append(c)
    return "".join(out)


def check_number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalcError("not_a_number", "the result is not a number")
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise CalcError("overflow", "the result is not a finite number")
    if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:
        raise CalcError("too_large", "the result is too large")
    return value


def power(base, exponent):
    if abs(exponent) > MAX_EXPONENT and abs(base) not in (0, 1):
        raise CalcError("too_large", f"exponents above {MAX_EXPONENT} are not allowed")
    if isinstance(base, int) and isinstance(exponent, int) and exponent >= 0:
        if base and exponent * math.log10(abs(base)) > 1000:
            raise CalcError("too_large", "the result is too large")
    return base ** exponent


BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: power,
}
UNARY = {ast.UAdd: lambda a: +a, ast.USub: lambda a: -a}


def evaluate_node(node, source, depth=0):
    if depth > MAX_DEPTH:
        raise CalcError("too_deep", "the expression is nested too deeply")
    if isinstance(node, ast.Expression):
        return evaluate_node(node.body, source, depth + 1)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left = evaluate_node(node.left, source, depth + 1)
        right = evaluate_node(node.right, source, depth + 1)
        try:
            return check_number(BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise CalcError("division_by_zero", "division by zero") from None
        except OverflowError:
            raise CalcError("overflow", "the result is too large") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return UNARY[type(node.op)](evaluate_node(node.operand, source, depth + 1))
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
        and 1 <= len(node.args) <= 8
    ):
        args = [evaluate_node(a, source, depth + 1) for a in node.args]
        try:
            return check_number(FUNCTIONS[node.func.id](*args))
        except (ValueError, TypeError) as err:
            raise CalcError("math_error", f"{node.func.id}: {err}") from None
        except OverflowError:
            raise CalcError("overflow", "the result is too large") from None
    part = (ast.get_source_segment(source, node) or type(node).__name__)[:60]
    raise CalcError(
        "unsupported",
        f"`{part}` is not allowed; use numbers, + - * / ^ %, parentheses, pi, e and "
        + ", ".join(sorted(FUNCTIONS)),
    )


def evaluate(expression, precision):
    if not expression.strip():
        raise CalcError("empty", "`expression` is empty")
    if len(expression) > MAX_LENGTH:
        raise CalcError("too_long", f"`expression` is longer than {MAX_LENGTH} characters")
    text = prepare(expression)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CalcError("syntax", f"`{expression}` is not an arithmetic expression") from None
    value = evaluate_node(tree, text)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        value = int(value)
    if isinstance(value, float):
        value = round(value, precision)
    text_value = str(value) if isinstance(value, int) else repr(value)
    return {"expression": expression, "normalized": text, "result": value, "text": text_value}


def main():
    try:
        request = json.load(sys.stdin)
        arguments = request.get("arguments") or {}
        expression = str(arguments.get("expression", ""))
        precision = int(arguments.get("precision", 10))
        if not 0 <= precision <= 15:
            raise CalcError("bad_precision", "`precision` must be between 0 and 15")
        result = evaluate(expression, precision)
    except CalcError as err:
        json.dump({"error": str(err), "code": err.code}, sys.stdout, ensure_ascii=False)
        return 1
    except (ValueError, TypeError, AttributeError) as err:
        json.dump({"error": f"bad request: {err}", "code": "bad_request"}, sys.stdout)
        return 1
    json.dump(result, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
