"""Make moto's expressions cost a parse once per expression text, not per request.

moto parses an UpdateExpression with a tokenizer and parser written in Python twice per
UpdateItem (once to check the request, once to apply it), the validator then deep-copies the
tree before it resolves names and values into the copy, and every ConditionExpression is lexed
with a regular expression per token. A job's life sends a few dozen distinct expressions
thousands of times, so the local stack spent more time parsing and copying than updating. Here a
parsed update expression is kept per expression text (the tree nobody changes: the validator
works on its copy), the copy is a pickle round trip (a few times cheaper than `copy.deepcopy` of
the same tree), and a condition's tokens are kept per text (the parse that puts names and values
in runs every time). The validator's passes over the tree each rebuilt their map of node kinds
for every node they visited; the kinds are a class's own, so they are kept per class. Answers
are unchanged: the same trees, the same validation.
"""

from __future__ import annotations

import copy
import functools
import pickle
from collections import deque
from typing import Any, Final

_PATCHED: Final = "_jobstream_cached_expressions"
# Distinct update expressions kept parsed (the store sends a few dozen).
CACHED_EXPRESSIONS: Final = 1024


def _fast_copy(value: Any) -> Any:
    """`copy.deepcopy` of an expression tree or a value, by pickling where it can."""
    try:
        return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))  # noqa: S301 - our own bytes
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy(value)


def _cache_condition_tokens() -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    lex = ConditionExpressionParser._lex_condition_expression

    @functools.lru_cache(maxsize=CACHED_EXPRESSIONS)
    def tokens(expression: str) -> tuple[Any, ...]:
        return tuple(lex(ConditionExpressionParser(expression, None, None)))

    def lexed(self: Any) -> deque[Any]:
        # Fresh child lists, as the lexer makes them: later steps own what they are handed.
        return deque(node._replace(children=[]) for node in tokens(self.condition_expression))

    ConditionExpressionParser.moto_lex = lex  # type: ignore[attr-defined]  # kept for comparison
    ConditionExpressionParser._lex_condition_expression = lexed  # type: ignore[method-assign]


def _node_kinds_per_class() -> None:
    from moto.dynamodb.parsing import ast_nodes

    traverser: Any = ast_nodes.DepthFirstTraverser  # type: ignore[attr-defined]
    kinds_of = traverser.nodes_to_be_processed
    known: dict[type, tuple[type, ...]] = {}

    def nodes_to_be_processed(self: Any) -> tuple[type, ...]:
        kinds = known.get(type(self))
        if kinds is None:
            kinds = known[type(self)] = kinds_of(self)
        return kinds

    traverser.moto_nodes_to_be_processed = kinds_of  # kept for comparison
    traverser.nodes_to_be_processed = nodes_to_be_processed


def make_expressions_cheap() -> None:
    from moto.dynamodb.parsing import expressions, validators

    parser: Any = expressions.UpdateExpressionParser  # type: ignore[attr-defined]
    if getattr(parser, _PATCHED, False):
        return
    parse = parser.make.__func__

    parsed = functools.lru_cache(maxsize=CACHED_EXPRESSIONS)(parse)

    def make(cls: Any, expression: str) -> Any:
        return parsed(cls, expression)

    parser.moto_make = parser.make  # kept for comparison
    parser.make = classmethod(make)
    setattr(validators, "deepcopy", _fast_copy)  # noqa: B010 - the name moto's validator calls
    _cache_condition_tokens()
    _node_kinds_per_class()
    setattr(parser, _PATCHED, True)
