"""text.stats: counts words and characters (takes a plain text part, answers a dict)."""

from pydantic import BaseModel, Field


class StatsInput(BaseModel):
    text: str = Field(description="Text to analyse")


class StatsOutput(BaseModel):
    words: int
    characters: int


class TextStats:
    input_schema = StatsInput
    output_schema = StatsOutput
    description = "Count the words and characters of a text"
    tags = ["text"]

    def execute(self, inputs: dict, context: object) -> dict:
        text = inputs["text"]
        return {"words": len(text.split()), "characters": len(text)}
