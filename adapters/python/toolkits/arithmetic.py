"""Math: the four operations on two numbers."""

from __future__ import annotations

from typing import Annotated

from adapters.python import ToolError, Toolkit, tool

Number = int | float  # ints stay ints: 10 + 5 is 15, not 15.0


@tool(side_effects=False, blocking=False)
def add(a: Annotated[Number, "The first number"], b: Annotated[Number, "The second number"]) -> Number:
    """Add two numbers."""
    return a + b


@tool(side_effects=False, blocking=False)
def subtract(
    a: Annotated[Number, "The number to subtract from"], b: Annotated[Number, "The number to subtract"]
) -> Number:
    """Subtract b from a."""
    return a - b


@tool(side_effects=False, blocking=False)
def multiply(a: Annotated[Number, "The first factor"], b: Annotated[Number, "The second factor"]) -> Number:
    """Multiply two numbers."""
    return a * b


@tool(side_effects=False, blocking=False)
def divide(a: Annotated[Number, "The dividend"], b: Annotated[Number, "The divisor (not zero)"]) -> Number:
    """Divide a by b."""
    if b == 0:
        raise ToolError(
            "Cannot divide by zero",
            developer_message=f"Math.Divide called with a={a!r}, b=0",
            additional_prompt_content="Choose a divisor other than 0.",
        )
    return a / b


toolkit = Toolkit("Math", [add, subtract, multiply, divide], description="Arithmetic on two numbers")
