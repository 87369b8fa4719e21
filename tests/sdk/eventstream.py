"""Reads an AWS event stream on stdin with botocore's own parser (both
CRCs checked, as the AWS SDK for Python does) and prints each message's
headers and payload as JSON lines."""

import base64
import json
import sys

from botocore.eventstream import EventStreamBuffer

buf = EventStreamBuffer()
buf.add_data(sys.stdin.buffer.read())
for message in buf:
    print(json.dumps({
        "headers": {k: v for k, v in message.headers.items()},
        "payload": base64.b64encode(message.payload).decode(),
    }))
