# Import stub (scripts/crawl4ai-e2e/stub.py, copied by run.sh): the module is not in
# Debian; crawl4ai imports it when loaded, and the client code run here
# never calls it. Any use raises.
class _Stub:
    def __init__(self, *a, **k):
        pass
    def __call__(self, *a, **k):
        raise RuntimeError(__name__ + " is stubbed in this harness")
    def __getattr__(self, n):
        raise RuntimeError(__name__ + " is stubbed in this harness")
    def __class_getitem__(cls, item):
        return cls
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (_Stub,), {})
