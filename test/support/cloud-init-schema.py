"""Validates cloud-config documents with cloud-init's own schema code, many per process.

Same checks as `cloud-init schema --config-file F` (header, YAML, strict schema incl.
deprecations) but without paying ~0.7 s of interpreter start-up per document.
Protocol: one JSON object per stdin line {"id": n, "text": "..."}; one JSON object per
stdout line {"id": n, "output": "..."} where an empty output means valid.
Run with /usr/bin/python3 (the Debian python that has the cloudinit module).
"""
import contextlib
import io
import json
import logging
import os
import sys
import tempfile

from cloudinit.config.schema import (
    SchemaValidationError,
    get_schema,
    validate_cloudconfig_file,
)

logging.disable(logging.CRITICAL)  # cloud-init logs warnings we report through `output` instead
SCHEMA = get_schema()
DEPRECATIONS_PREFIX = "Cloud config schema deprecations: "  # printed even when there are none


def validate(text: str) -> str:
    fd, path = tempfile.mkstemp(prefix="cloud-config-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        printed = io.StringIO()
        problems = []
        try:
            # It print()s deprecations (exit 0 in the CLI); keep stdout for our protocol and
            # report them, since a renderer must not emit deprecated keys either.
            with contextlib.redirect_stdout(printed):
                validate_cloudconfig_file(path, SCHEMA)
        except (SchemaValidationError, RuntimeError) as e:
            problems.append(str(e))
        deprecations = printed.getvalue().strip()
        if deprecations and deprecations != DEPRECATIONS_PREFIX.strip():
            problems.insert(0, deprecations)
        return "\n".join(problems).replace(path, "<cloud-config>")
    finally:
        os.unlink(path)


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            output = validate(req["text"])
        except Exception as e:  # report, never die: the caller waits for this id
            output = f"validator crashed: {type(e).__name__}: {e}"
        sys.stdout.write(json.dumps({"id": req["id"], "output": output}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
