"""A caller that sends one request and reads its answer only when told to, and then at a pace it is given.

    python3 slow-reader.py PORT REQUEST

Connects with small socket buffers (4 KiB to receive, 16 KiB to send), so the kernel holds little of the
answer and the server meets backpressure soon. Sends REQUEST, prints "connected"; reads nothing until a
line "read BYTES PAUSE_MS" on stdin, then reads at most BYTES at a time with a pause of PAUSE_MS after each,
until the answer's last chunk (or the connection's end), and prints "read STATUS BYTES EVENTS COMPLETE":
the answer's status, how many bytes came, how many `data: ` fields, and 1 if the chunked body ended with its
last chunk (0 if the connection ended first). Without that line it never reads: a stalled caller.
"""
import socket
import sys
import time

port, request = int(sys.argv[1]), sys.argv[2].encode("latin-1")
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
sock.connect(("127.0.0.1", port))
sock.sendall(request)
print("connected", flush=True)

command = sys.stdin.readline().split()
if command and command[0] == "read":
    size, pause = int(command[1]), float(command[2]) / 1000
    last_chunk = b"\r\n0\r\n\r\n"
    received = bytearray()
    complete = 0
    while True:
        try:
            chunk = sock.recv(size)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
        if received.endswith(last_chunk):
            complete = 1
            break
        if pause > 0:
            time.sleep(pause)
    status = received[9:12].decode("latin-1") if received.startswith(b"HTTP/1.1 ") else "none"
    print(f"read {status} {len(received)} {received.count(b'data: ')} {complete}", flush=True)
    sys.stdin.readline()
sock.close()
