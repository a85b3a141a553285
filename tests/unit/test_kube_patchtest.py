from tui.core.cluster.kube.patchtest import failed_tests, pointer_get, short


def test_failed_tests_name_each_changed_value_with_escaped_keys_and_missing_ones() -> None:
    obj = {"metadata": {"annotations": {"a/b": "1"}}, "spec": {"replicas": 4, "c": [{"x": 1}]}}
    patch = [{"op": "test", "path": "/spec/replicas", "value": 2},
             {"op": "test", "path": "/metadata/annotations/a~1b", "value": "1"},
             {"op": "test", "path": "/spec/c/1/x", "value": 1},
             {"op": "replace", "path": "/spec/replicas", "value": 3}]
    assert failed_tests(obj, patch) == [("/spec/replicas", 2, 4), ("/spec/c/1/x", 1, None)]
    assert pointer_get(obj, "/spec/c/0/x") == 1
    assert failed_tests(obj, {"merge": "patch"}) == []
    assert short(list(range(1000)), 20).endswith("...") and len(short(list(range(1000)), 20)) == 20
