"""A caller that pipelines requests and reads no answer until told to: what a careless or hostile client does.

    python3 unreading-caller.py PORT COUNT REQUEST

Connects with small socket buffers (4 KiB to receive, 16 KiB to send), so the kernel holds little of what is
in flight and the server's own buffering shows. Sends REQUEST COUNT times (blocking when the server stops
reading), prints "connected" once connected; on a line "read" on stdin, reads the answers, and prints
"answers N" once COUNT answers (status lines) have come.
"""
import socket
import sys
import threading

port, count, request = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode("latin-1")
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
sock.connect(("127.0.0.1", port))
sender = threading.Thread(target=sock.sendall, args=(request * count,), daemon=True)
sender.start()
print("connected", flush=True)

if sys.stdin.readline().strip() == "read":
    marker = b"HTTP/1.1 "
    answers, tail = 0, b""
    while answers < count:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data = tail + chunk
        answers += data.count(marker)
        # Too short to hold a whole marker, so nothing is counted twice: the start of one cut by the chunk's end.
        tail = data[-(len(marker) - 1):]
    print(f"answers {answers}", flush=True)
sock.close()
