"""Loads cloud-config documents exactly as cloud-init does (cloudinit.util.load_yaml, PyYAML in
YAML 1.1) and prints the result as JSON, many documents per process.
Protocol: one JSON object per stdin line {"id": n, "text": "..."}; one per stdout line
{"id": n, "doc": {...}} or {"id": n, "error": "..."}. Run with /usr/bin/python3.
"""
import json
import sys

from cloudinit import util


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            doc = util.load_yaml(req["text"], default=None, allowed=(dict,))
            out = {"id": req["id"], "doc": doc}
        except Exception as e:  # report, never die: the caller waits for this id
            out = {"id": req["id"], "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out, default=str) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
