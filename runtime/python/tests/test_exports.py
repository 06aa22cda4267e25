"""Which names of the module are callable: its own functions (or its __all__), never what it imports (issue 31)."""

import os
import tempfile

from .runtime_process import RuntimeTestCase, call


class ProblemAssertions:
    def assertNotFound(self, name, arguments=None):
        status, headers, body = self.call(name, arguments or {})
        self.assertEqual(status, 404, body)
        self.assertEqual(headers["content-type"], "application/problem+json")
        self.assertEqual(body["type"], "https://runlet.dev/problems#function-not-found")
        return body


class ImportedCallablesTests(ProblemAssertions, RuntimeTestCase):
    app = "imports"

    def test_an_imported_getenv_does_not_answer_the_environment(self):
        self.assertNotFound("getenv", {"key": "PATH"})
        # Nor does checking the call (what the sidecar asks before an async call's 202) say it would run.
        status, _, _ = self.call("getenv", {"key": "PATH"}, headers={"x-runlet-validate": "1"})
        self.assertEqual(status, 404)

    def test_an_imported_check_output_runs_nothing(self):
        with tempfile.TemporaryDirectory() as folder:
            marker = os.path.join(folder, "ran")
            self.assertNotFound("check_output", {"args": ["touch", marker]})
            self.assertFalse(os.path.exists(marker))

    def test_an_imported_module_and_its_attributes_are_not_functions(self):
        self.assertNotFound("os")
        self.assertNotFound("os.getenv", {"key": "PATH"})
        self.assertNotFound("os/getenv", {"key": "PATH"})

    def test_an_imported_class_is_not_a_function(self):
        self.assertNotFound("OrderedDict")

    def test_an_imported_builtin_is_not_a_function(self):
        self.assertNotFound("sqrt", {"x": 4})
        self.assertNotFound("square_root", {"x": 4})
        self.assertNotFound("length", {"obj": [1]})

    def test_a_library_s_wrapper_around_an_imported_function_is_not_the_app_s(self):
        self.assertNotFound("cached_getenv", {"key": "PATH"})

    def test_a_partial_of_an_imported_function_is_not_the_app_s(self):
        self.assertNotFound("run_id")

    def test_a_function_of_another_module_of_the_app_is_not_main_s(self):
        self.assertNotFound("shout", {"text": "hi"})
        self.assertNotFound("helpers")

    def test_an_imported_object_that_raises_for_every_attribute_is_not_served_and_did_not_stop_the_start(self):
        self.assertNotFound("proxy")

    def test_the_module_s_own_function(self):
        self.assertEqual(self.call("own", {})[::2], (200, "own"))

    def test_an_own_function_decorated_with_functools_wraps(self):
        # wraps copies __module__ from the function it wraps; the wrapper's code is still the module's.
        self.assertEqual(self.call("decorated", {"x": 4})[::2], (200, 8))

    def test_an_imported_function_wrapped_by_the_app_s_own_decorator_is_the_app_s(self):
        self.assertEqual(self.call("compact", {"obj": [1, 2]})[::2], (200, "[1, 2]"))

    def test_an_own_function_under_a_library_decorator(self):
        self.assertEqual(self.call("cached", {"x": 1})[::2], (200, 2))

    def test_a_lambda_partial_and_callable_instance_made_in_the_module(self):
        self.assertEqual(self.call("double", {"x": 3})[::2], (200, 6))
        self.assertEqual(self.call("prefixed", {})[::2], (200, "prefixed"))
        self.assertEqual(self.call("greeter", {"name": "Ada"})[::2], (200, "hi Ada"))

    def test_private_names_are_not_functions(self):
        self.assertNotFound("_hidden")
        self.assertNotFound("__loader__")

    def test_the_start_up_log_lists_exactly_what_is_callable(self):
        self.runtime.wait_for_output("functions of module main:")
        line = next(line for line in self.runtime.output.splitlines() if "functions of module main:" in line)
        listed = line.split("functions of module main: ", 1)[1].split(", ")
        self.assertEqual(listed, ["own", "traced", "decorated", "compact", "cached", "double", "prefixed", "greeter"])


class BrowserCallsTests(RuntimeTestCase):
    """Only the sidecar calls the runtime: a web page that found its loopback port (runlet dev's) is refused."""

    app = "imports"

    def test_a_request_a_browser_sent_is_refused_before_any_code_runs(self):
        for header in ({"Origin": "http://attacker.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-origin"}):
            connection = self.runtime.connect()
            self.addCleanup(connection.close)
            status, headers, body = call(connection, "own", {}, headers={"Content-Type": "text/plain", **header})
            self.assertEqual(status, 403, header)
            self.assertEqual(body["type"], "https://runlet.dev/problems#forbidden")

    def test_the_sidecar_s_request_is_served(self):
        self.assertEqual(self.call("own", {})[::2], (200, "own"))


class ModuleGetattrTests(ProblemAssertions, RuntimeTestCase):
    """A module `__getattr__` answers every name it lacks from another module: it neither adds functions nor
    brings that module's `__all__` (subprocess's names `check_output`, `getoutput`, `run`) as the app's."""

    app = "shim"

    def test_names_answered_by_a_module_getattr_are_not_served(self):
        with tempfile.TemporaryDirectory() as folder:
            marker = os.path.join(folder, "ran")
            self.assertNotFound("getoutput", {"cmd": f"touch {marker}"})
            self.assertNotFound("run", {"args": ["touch", marker]})
            self.assertFalse(os.path.exists(marker))

    def test_the_module_s_own_functions_are_still_served(self):
        self.assertEqual(self.call("hello", {"name": "Ada"})[::2], (200, "hi Ada"))


class ExportedImportsTests(ProblemAssertions, RuntimeTestCase):
    """With __all__, exactly the names in it are served: an imported function the author named is served."""

    app = "exported"

    def test_an_imported_function_named_in_dunder_all_is_served(self):
        self.assertEqual(self.call("basename", {"p": "/a/b.txt"})[::2], (200, "b.txt"))

    def test_an_own_function_left_out_of_dunder_all_is_not(self):
        self.assertNotFound("helper")

    def test_an_imported_function_left_out_of_dunder_all_is_not(self):
        self.assertNotFound("getenv", {"key": "PATH"})

    def test_a_class_or_private_name_in_dunder_all_is_still_not_a_function(self):
        self.assertNotFound("Model")
        self.assertNotFound("_private")

    def test_the_start_up_log_lists_dunder_all_s_functions_in_its_order(self):
        self.runtime.wait_for_output("functions of module main: run, basename\n")
