// The real Node's cluster DNS (node.sh starts it inside the Node's network namespace, the kubelet names it to
// pods with --cluster-dns): `<service>.<namespace>.svc.<cluster domain>` answers the Service's cluster IP,
// read from the API server at each question, so a Service is known the moment it exists. It stands in for
// CoreDNS, which Debian does not package, and does only what pods here ask of it: A records of ClusterIP
// Services (a headless Service, with no cluster IP, has none: its pods are not named); AAAA questions get
// no answer (the cluster is IPv4); every other name is NXDOMAIN, for there is no upstream to ask (nothing in
// the namespace reaches off the machine), and a resolver walks its search list on NXDOMAIN. UDP only: the
// answers, one address each, never need TCP's length.
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import * as dnsPacket from 'dns-packet';

/** The Service's cluster IP, or undefined when there is no such Service; throws when the API server cannot tell. */
export type ServiceLookup = (namespace: string, name: string) => Promise<string | undefined>;

const RCODE_SERVFAIL = 2;
const RCODE_NXDOMAIN = 3;
/** Short: a Service deleted and made again gets a new address. */
const TTL_SECONDS = 5;

export interface ClusterDns {
  readonly port: number;
  close(): Promise<void>;
}

export async function startClusterDns(options: {
  address: string;
  port: number;
  clusterDomain: string;
  lookup: ServiceLookup;
  onError: (error: Error) => void;
}): Promise<ClusterDns> {
  const suffix = `.svc.${options.clusterDomain.toLowerCase()}`;
  const socket = createSocket('udp4');
  socket.on('message', (message, remote) => void answer(socket, message, remote, suffix, options));
  socket.on('error', options.onError);
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(options.port, options.address, () => {
      socket.off('error', reject);
      resolve();
    });
  });
  return {
    port: socket.address().port,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

async function answer(
  socket: Socket,
  message: Buffer,
  remote: RemoteInfo,
  suffix: string,
  options: { lookup: ServiceLookup; onError: (error: Error) => void },
): Promise<void> {
  let query: dnsPacket.DecodedPacket;
  try {
    query = dnsPacket.decode(message);
  } catch {
    // Not a DNS message: nothing to answer it with.
    return;
  }
  const [question] = query.questions ?? [];
  let rcode = 0;
  const answers: dnsPacket.Answer[] = [];
  if (query.type !== 'query' || question === undefined || (query.questions?.length ?? 0) > 1) {
    rcode = RCODE_SERVFAIL;
  } else {
    const service = serviceOf(question.name.toLowerCase(), suffix);
    try {
      const clusterIp = service === null ? undefined : await options.lookup(service.namespace, service.name);
      if (clusterIp === undefined) rcode = RCODE_NXDOMAIN;
      else if (question.type === 'A' && clusterIp !== 'None') answers.push({ type: 'A', name: question.name, ttl: TTL_SECONDS, data: clusterIp });
    } catch (error) {
      options.onError(new Error(`looking up ${question.name} for ${remote.address}:${remote.port}: ${(error as Error).message}`, { cause: error }));
      rcode = RCODE_SERVFAIL;
    }
  }
  const flags = dnsPacket.AUTHORITATIVE_ANSWER | (query.flag_rd ? dnsPacket.RECURSION_DESIRED : 0) | rcode;
  const response = dnsPacket.encode({ type: 'response', id: query.id, flags, questions: query.questions, answers });
  socket.send(response, remote.port, remote.address);
}

/** `<service>.<namespace>.svc.<domain>` as its parts; null for any other name. */
function serviceOf(name: string, suffix: string): { namespace: string; name: string } | null {
  const fqdn = name.endsWith('.') ? name.slice(0, -1) : name;
  if (!fqdn.endsWith(suffix)) return null;
  const labels = fqdn.slice(0, -suffix.length).split('.');
  if (labels.length !== 2 || labels.some((label) => label === '')) return null;
  return { name: labels[0]!, namespace: labels[1]! };
}
