"""bench.turns: a conversation of `turns` follow-ups on one task, each answered with a question."""

from pydantic import BaseModel, Field

from apcore_a2a import InputRequired


class TurnsInput(BaseModel):
    turns: int = Field(default=1, ge=0, le=100_000, description="follow-ups before it ends")
    turn: int = Field(default=0, ge=0, description="the follow-up this call answers")
    pad: int = Field(default=100, ge=0, le=65_536, description="characters of each question")


class TurnsOutput(BaseModel):
    turns: int


class Turns:
    input_schema = TurnsInput
    output_schema = TurnsOutput
    description = "Ask again until the `turns`-th follow-up; then finish"

    def execute(self, inputs: dict, context: object) -> dict:
        turn = inputs.get("turn", 0)
        if turn < inputs.get("turns", 1):
            prompt = f"turn {turn}: next? " + "x" * inputs.get("pad", 100)
            raise InputRequired(prompt, data={"turn": turn})
        return {"turns": turn}
