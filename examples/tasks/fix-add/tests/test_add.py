# Hidden test: copied into tests/ only when grading, after the agent's edits to tests/ are reverted.
import sys

sys.path.insert(0, ".")
from calc import add

assert add(2, 3) == 5, f"add(2, 3) = {add(2, 3)}"
assert add(-1, 1) == 0
print("add: ok")
