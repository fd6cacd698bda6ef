import sys

sys.path.insert(0, ".")
from calc import add

assert add(0, 0) == 0
print("smoke: ok")
