// The functions a Python app offers, read from its module's source for `runlet dev`'s start-up hint. The
// source is parsed (Python's own `ast`), never imported: importing runs the app's top-level code, which the
// runtime does once, and may be slow or have effects.
import { execFile } from 'node:child_process';

export interface PythonParameter {
  name: string;
  /** The annotation as written (`str`, `list[int]`), or null. */
  annotation: string | null;
  required: boolean;
}

export interface PythonFunction {
  name: string;
  parameters: PythonParameter[];
}

/**
 * Parsing takes milliseconds, but the interpreter starts as slowly as the runtime's (seconds on a loaded
 * machine, or behind a version manager's shim), and the banner waits for both; a bound keeps a stuck
 * interpreter from holding it back for long.
 */
const READ_TIMEOUT_MS = 30_000;

/**
 * Top-level `def` and `async def` of the module, in source order, that the run interface can call (no leading
 * underscore); parameters that can be passed by name (no `*args`, `**kwargs` or positional-only ones).
 * Functions defined elsewhere and imported into the module are not seen.
 */
const SCRIPT = String.raw`
import ast, json, os, sys
app_dir, module = sys.argv[1], sys.argv[2]
base = os.path.join(app_dir, *module.split("."))
path = base + ".py" if os.path.isfile(base + ".py") else os.path.join(base, "__init__.py")
with open(path, "rb") as source:
    tree = ast.parse(source.read(), path)
functions = []
for node in tree.body:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
        continue
    args = node.args
    defaulted = len(args.args) - len(args.defaults)
    parameters = [(arg, i >= defaulted) for i, arg in enumerate(args.args)]
    parameters += [(arg, default is not None) for arg, default in zip(args.kwonlyargs, args.kw_defaults)]
    functions.append({"name": node.name, "parameters": [
        {"name": arg.arg, "annotation": ast.unparse(arg.annotation) if arg.annotation else None, "required": not has_default}
        for arg, has_default in parameters]})
print(json.dumps(functions))
`;

/** The app's functions, or null when its module cannot be read or parsed (the runtime will say why). */
export function readPythonFunctions(python: string, appDir: string, module: string): Promise<PythonFunction[] | null> {
  return new Promise((resolve) => {
    execFile(python, ['-c', SCRIPT, appDir, module], { timeout: READ_TIMEOUT_MS }, (error, stdout) => {
      if (error) return resolve(null);
      try {
        resolve(JSON.parse(stdout) as PythonFunction[]);
      } catch {
        resolve(null);
      }
    });
  });
}

/** `name(a: str, b: int = …)`: how the banner lists a function. */
export function signatureText(fn: PythonFunction): string {
  const parameters = fn.parameters.map((p) => `${p.name}${p.annotation ? `: ${p.annotation}` : ''}${p.required ? '' : ' = …'}`);
  return `${fn.name}(${parameters.join(', ')})`;
}

/**
 * A JSON body that binds to the function: its required parameters, each with a placeholder of its annotated
 * type (a string when the annotation says nothing this can fill), and none of the optional ones.
 */
export function sampleArguments(fn: PythonFunction): string {
  const body: Record<string, unknown> = {};
  for (const parameter of fn.parameters) if (parameter.required) body[parameter.name] = placeholder(parameter.annotation);
  return JSON.stringify(body);
}

function placeholder(annotation: string | null): unknown {
  // `Optional[int]`, `int | None`, `typing.List[str]`: the outer type, without its module or parameters.
  const type = (annotation ?? '').replace(/^(typing\.)?Optional\[(.*)\]$/, '$2').replace(/^typing\./, '').split(/[[|]/)[0]!.trim().toLowerCase();
  switch (type) {
    case 'int':
      return 1;
    case 'float':
      return 1.5;
    case 'bool':
      return true;
    case 'list':
    case 'tuple':
    case 'sequence':
      return [];
    case 'dict':
    case 'mapping':
      return {};
    default:
      return 'text';
  }
}
