"""interop.files: counts the bytes of the file it was given, so byte counts are checked here.

apcore hands a module the raw JSON input, so a binary field arrives base64-encoded once;
the module decodes it and reports what it received.
"""

import base64
import hashlib

from pydantic import BaseModel, Field


class FilesInput(BaseModel):
    data: bytes = Field(description="Any file")


class FilesOutput(BaseModel):
    size: int
    sha256: str


class FilesModule:
    input_schema = FilesInput
    output_schema = FilesOutput
    description = "Report the size and SHA-256 of the file received"

    def execute(self, inputs: dict, context: object) -> dict:
        data = base64.b64decode(inputs["data"], validate=True)
        return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
