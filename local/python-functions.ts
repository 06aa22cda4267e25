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
  /** Null when the source does not show them: a name `__all__` gives that the module imports or assigns. */
  parameters: PythonParameter[] | null;
}

/**
 * Parsing takes milliseconds, but the interpreter starts as slowly as the runtime's (seconds on a loaded
 * machine, or behind a version manager's shim), and the banner waits for both; a bound keeps a stuck
 * interpreter from holding it back for long.
 */
const READ_TIMEOUT_MS = 30_000;

/**
 * The functions the runtime serves (runtime/python/runlet_runtime/exports.py), as far as the source shows them:
 * the names in a literal `__all__` when the module has one (exactly those, in its order, less `_` names and the
 * module's classes); otherwise its top-level `def`, `async def` and `name = lambda` without a leading
 * underscore, in source order. Imported functions are not served, so not listed; objects the module builds at
 * import (a partial, a callable instance) are served but not seen here: the runtime's start-up log line
 * `functions of module ...` lists exactly what is callable. Parameters are those that can be passed by name
 * (no `*args`, `**kwargs` or positional-only ones). A non-literal `__all__` cannot be read: no list.
 */
const SCRIPT = String.raw`
import ast, json, os, sys
app_dir, module = sys.argv[1], sys.argv[2]
base = os.path.join(app_dir, *module.split("."))
path = base + ".py" if os.path.isfile(base + ".py") else os.path.join(base, "__init__.py")
with open(path, "rb") as source:
    tree = ast.parse(source.read(), path)

def parameters(args):
    defaulted = len(args.args) - len(args.defaults)
    pairs = [(arg, i >= defaulted) for i, arg in enumerate(args.args)]
    pairs += [(arg, default is not None) for arg, default in zip(args.kwonlyargs, args.kw_defaults)]
    return [{"name": arg.arg, "annotation": ast.unparse(arg.annotation) if arg.annotation else None, "required": not has_default}
            for arg, has_default in pairs]

defined, classes, exported = {}, set(), None
for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        defined[node.name] = parameters(node.args)
    elif isinstance(node, ast.ClassDef):
        classes.add(node.name)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            if not isinstance(target, ast.Name):
                continue
            if target.id == "__all__":
                try:
                    exported = ast.literal_eval(node.value)
                except ValueError:
                    sys.exit("__all__ is not a literal")
                exported = [exported] if isinstance(exported, str) else list(exported)
            elif isinstance(node.value, ast.Lambda):
                defined[target.id] = parameters(node.value.args)
names = defined if exported is None else dict.fromkeys(n for n in exported if isinstance(n, str) and n not in classes)
print(json.dumps([{"name": name, "parameters": defined.get(name)} for name in names if not name.startswith("_")]))
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

/** `name(a: str, b: int = …)`: how the banner lists a function; `name(…)` when its parameters are not known. */
export function signatureText(fn: PythonFunction): string {
  if (fn.parameters === null) return `${fn.name}(…)`;
  const parameters = fn.parameters.map((p) => `${p.name}${p.annotation ? `: ${p.annotation}` : ''}${p.required ? '' : ' = …'}`);
  return `${fn.name}(${parameters.join(', ')})`;
}

/**
 * A JSON body that binds to the function: its required parameters, each with a placeholder of its annotated
 * type (a string when the annotation says nothing this can fill), and none of the optional ones.
 */
export function sampleArguments(fn: PythonFunction): string {
  const body: Record<string, unknown> = {};
  for (const parameter of fn.parameters ?? []) if (parameter.required) body[parameter.name] = placeholder(parameter.annotation);
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
