// README.md's "On Kubernetes" as commands to run, so the walkthrough test (readme-walkthrough.test.ts) runs what
// the README says and the two cannot drift: every `sh` block of the section, in order, one command per line
// (continuation lines joined, comments dropped). The `bash` blocks are the section's notes for the test tier,
// not steps. Where the tier (Kubernetes 1.20, no Helm or ingress, a Node whose pods and Services have addresses
// only inside its network namespace) differs from a real cluster, a command is adapted by ADAPTATIONS, each of
// which must apply at least once.

export interface ReadmeCommand {
  /** The `###` heading the command is under. */
  readonly section: string;
  /** As written in the README (one line). */
  readonly readme: string;
  /** What the tier runs instead; undefined when the tier skips it. */
  readonly tier: string | undefined;
}

export interface Adaptation {
  /** Matches the part of a command the tier does differently. */
  readonly pattern: RegExp;
  /** The replacement (with `$1`… as String.replace takes them), or null: the command is skipped. */
  readonly replacement: string | ((...groups: string[]) => string) | null;
  readonly why: string;
}

const DURATION_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600 };

/** `kubectl create token` (1.24+) as the TokenRequest call that 1.20 serves, printing the token likewise. */
export function tokenRequestCommand(account: string, namespace: string, audience: string | undefined, duration: string | undefined): string {
  const [, amount, unit] = /^(\d+)([smh])$/.exec(duration ?? '1h') ?? [];
  if (amount === undefined) throw new Error(`kubectl create token --duration ${duration}: only whole s, m or h are understood here`);
  const spec = { ...(audience === undefined ? {} : { audiences: [audience] }), expirationSeconds: Number(amount) * DURATION_SECONDS[unit!]! };
  const request = JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec });
  return `echo '${request}' | kubectl create --raw /api/v1/namespaces/${namespace}/serviceaccounts/${account}/token -f - | jq -r .status.token`;
}

export const ADAPTATIONS: readonly Adaptation[] = [
  { pattern: /^make images$/, replacement: null, why: 'the Node runs the images `make images` built before the tier (make test-cluster), imported into its containerd' },
  { pattern: /^helm /, replacement: null, why: 'no Helm here: install.yaml is the chart rendered with its default values' },
  {
    pattern: /^kubectl (apply|delete) -f install\.yaml$/,
    replacement: 'npm run -s kube-1.20 -- install.yaml | kubectl $1 -f -',
    why: 'Kubernetes 1.20 serves no CEL rules, no policy/v1 and no native sidecars (test/control-plane/kube-1.20.ts)',
  },
  {
    pattern: /kubectl create token ([^\s)]+) -n ([^\s)]+)(?: --audience ([^\s)]+))?(?: --duration ([^\s)]+))?/,
    replacement: (_match, account, namespace, audience, duration) => tokenRequestCommand(account!, namespace!, audience, duration),
    why: '`kubectl create token` is 1.24+: the TokenRequest API, which it calls',
  },
  { pattern: /https:\/\/runlet\.example\.com/g, replacement: '$APP_URL', why: 'no ingress: the App’s Service, at its cluster IP (curl runs in the Node’s network namespace)' },
  { pattern: /https:\/\/runlet-api\.example\.com/g, replacement: '$MANAGEMENT_API_URL', why: 'no ingress: the operator’s Service, at its cluster IP (runlet runs in the Node’s network namespace)' },
];

/** The section of `markdown` under `## title`, up to the next `## ` heading. */
function section(markdown: string, title: string): string {
  const start = markdown.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`README.md has no section "## ${title}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, end < 0 ? undefined : end);
}

/** The command lines of a shell block: continuations joined, blank lines and comments dropped. */
function commandLines(block: string): string[] {
  return block
    .replace(/\s*\\\n\s*/g, ' ')
    .split('\n')
    .map((line) => line.replace(/\s+#\s.*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** `command` as the tier runs it, and the adaptations that applied (a skip ends the search). */
function adapt(command: string, used: Set<Adaptation>): string | undefined {
  let tier = command;
  for (const adaptation of ADAPTATIONS) {
    if (!adaptation.pattern.test(tier)) continue;
    adaptation.pattern.lastIndex = 0;
    used.add(adaptation);
    if (adaptation.replacement === null) return undefined;
    const { pattern, replacement } = adaptation;
    tier = typeof replacement === 'string' ? tier.replace(pattern, replacement) : tier.replace(pattern, replacement);
  }
  return tier;
}

/** The command lines of the section's `bash` blocks: what it tells a person to do on the test tier. */
export function tierNotes(markdown: string): string[] {
  return [...section(markdown, 'On Kubernetes').matchAll(/^```bash\n([\s\S]*?)^```$/gm)].flatMap((match) => commandLines(match[1]!));
}

/** The commands of README's "On Kubernetes"; throws when an adaptation no longer applies to any of them. */
export function readmeWalkthrough(markdown: string): ReadmeCommand[] {
  const commands: ReadmeCommand[] = [];
  const used = new Set<Adaptation>();
  let heading = '';
  for (const match of section(markdown, 'On Kubernetes').matchAll(/^### (.+)$|^```sh\n([\s\S]*?)^```$/gm)) {
    if (match[1] !== undefined) {
      heading = match[1];
      continue;
    }
    for (const readme of commandLines(match[2]!)) commands.push({ section: heading, readme, tier: adapt(readme, used) });
  }
  const unused = ADAPTATIONS.filter((adaptation) => !used.has(adaptation));
  if (unused.length > 0) {
    throw new Error(`README.md's "On Kubernetes" no longer has what these adaptations are for: ${unused.map((a) => a.pattern).join(', ')}`);
  }
  return commands;
}
