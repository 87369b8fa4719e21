#!/usr/bin/env python3
"""Put results files into docs/benchmarks.md, each between its markers.

    python3 bench/splice_results.py DOC MARKER=FILE [MARKER=FILE ...]

A file that does not exist is skipped; a marker pair not yet in the
document is added at its end."""
import os
import sys

doc = sys.argv[1]
text = open(doc).read()
for pair in sys.argv[2:]:
    marker, path = pair.split("=", 1)
    if not os.path.exists(path):
        continue
    part = open(path).read().rstrip()
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    block = f"{start}\n{part}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
open(doc, "w").write(text)
