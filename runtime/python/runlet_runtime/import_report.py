"""What a failed import of the user's module says: where (file and line) and what, for a person fixing it."""

import json
import os
import traceback

# The supervisor reads this exit status as "the module cannot be imported": retrying will not help until its
# files change (sysexits.h EX_CONFIG).
IMPORT_FAILED_EXIT_STATUS = 78


def describe_import_error(error, app_dir):
    """One line: `main.py line 3: SyntaxError: invalid syntax`, located in the app's own code where it can be."""
    app_dir = os.path.abspath(app_dir)
    if isinstance(error, SyntaxError) and error.filename:
        filename, line, message = error.filename, error.lineno, error.msg
    else:
        filename, line = _innermost_app_frame(error, app_dir)
        message = str(error)
    where = _relative(filename, app_dir)
    location = f"{where} line {line}" if line else where
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return f"{location}: {text}" if location else text


def write_import_error(path, error, app_dir):
    """Written whole (renamed into place), so the supervisor never reads half of it."""
    report = {
        "summary": describe_import_error(error, app_dir),
        "traceback": "".join(traceback.format_exception(error)),
    }
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as file:
        json.dump(report, file)
    os.replace(temporary, path)


def _innermost_app_frame(error, app_dir):
    frames = traceback.extract_tb(error.__traceback__)
    # The import machinery's own frames say nothing to the user: the deepest frame in the app's folder does.
    own = [frame for frame in frames if os.path.abspath(frame.filename).startswith(app_dir + os.sep)]
    chosen = (own or frames or [None])[-1]
    return (chosen.filename, chosen.lineno) if chosen else (None, None)


def _relative(filename, app_dir):
    if not filename:
        return None
    absolute = os.path.abspath(filename)
    return os.path.relpath(absolute, app_dir) if absolute.startswith(app_dir + os.sep) else filename
