// `node --import` this in a process the test kubelet runs (pod-network-dials.ts): a connection to a pod IP's
// port goes to the loopback port standing for it, as the file $RUNLET_TEST_POD_NETWORK says. Imported after
// the loopback guard, so this rewrite runs first and the guard sees the loopback address.
import { Socket } from 'node:net';
import { dialMapReader, POD_NETWORK_ENV } from './pod-network-dials.ts';

const file = process.env[POD_NETWORK_ENV];
if (file !== undefined && file !== '') {
  const read = dialMapReader(file);
  type Connect = (this: Socket, ...args: unknown[]) => Socket;
  const target = Socket.prototype as unknown as { connect: Connect };
  const original = target.connect;
  target.connect = function (this: Socket, ...args: unknown[]) {
    // net.connect passes its normalized arguments as one array: [options, callback]; else (options, cb) or (port, host, cb).
    const normalized = Array.isArray(args[0]) ? (args[0] as unknown[]) : args;
    const first = normalized[0];
    if (typeof first === 'object' && first !== null) {
      const options = first as { host?: unknown; port?: unknown };
      const local = typeof options.host === 'string' ? read()[options.host]?.[String(options.port)] : undefined;
      if (local !== undefined) {
        options.host = '127.0.0.1';
        options.port = local;
      }
    } else if (typeof normalized[1] === 'string') {
      const local = read()[normalized[1]]?.[String(normalized[0])];
      if (local !== undefined) {
        normalized[0] = local;
        normalized[1] = '127.0.0.1';
      }
    }
    return original.apply(this, args);
  };
}
