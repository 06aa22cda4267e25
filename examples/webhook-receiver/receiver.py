"""A webhook receiver that verifies Runlet's signature. Standard library only.

    python3 receiver.py --port 9000 --secret "$WEBHOOK_SECRET"
"""
import argparse
import hashlib
import hmac
import json
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

# Each attempt is signed as it is sent: a timestamp further than this from now is a replay of a captured
# delivery (or a clock far off), refused even though its signature is genuine.
TOLERANCE_SECONDS = 5 * 60


def verify_signature(secret: str, request_id: str, timestamp: str, signature: str, raw_body: bytes) -> bool:
    if not (timestamp.isascii() and timestamp.isdigit()) or abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        return False
    received = signature.split(",", 1)[1] if "," in signature else signature
    signed = f"{request_id}.{timestamp}.".encode() + raw_body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(received, expected)


def make_handler(secret: str):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            raw_body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            ok = verify_signature(
                secret,
                self.headers.get("X-Request-Id", ""),
                self.headers.get("X-Service-Webhook-Timestamp", ""),
                self.headers.get("X-Service-Webhook-Signature", ""),
                raw_body,
            )
            if not ok:
                self.send_response(401)
                self.end_headers()
                return
            delivery = json.loads(raw_body)
            # Deliveries can repeat: handle each run_id once (idempotent receiver).
            print(f"verified run {delivery['run_id']} {delivery['status']}", flush=True)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    return Handler


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--secret", required=True)
    args = parser.parse_args()
    server = HTTPServer(("127.0.0.1", args.port), make_handler(args.secret))
    print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()
