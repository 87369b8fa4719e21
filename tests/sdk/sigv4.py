"""Sign one Bedrock request with botocore's own SigV4 signer and print the
headers it adds, as JSON: the reference the Bedrock stand-in's signature
check (tests/common/provider/bedrock.rs) is held to in tests/llm_bedrock.rs.

usage: sigv4.py URL BODY ACCESS_KEY_ID SECRET REGION
"""

import json
import sys

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

url, body, key_id, secret, region = sys.argv[1:6]
request = AWSRequest(
    method="POST",
    url=url,
    data=body.encode(),
    headers={"content-type": "application/json"},
)
SigV4Auth(Credentials(key_id, secret), "bedrock", region).add_auth(request)
print(json.dumps({k.lower(): v for k, v in request.headers.items()}))
