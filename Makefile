# The two commands of README.rst. Both set up what they need first.
.PHONY: bootstrap demo demo-hooks test

bootstrap:
	./tools/bootstrap.sh

# The main job through real Tacker (tacker-server and tacker-conductor from
# the tox env "tacker", which is created here if needed).
demo: bootstrap
	.venv/bin/tox -e tacker --notest
	.tox/tacker/bin/python -m tools.demo_tacker

# The same lifecycle driving the driver's hooks directly: a quick check.
demo-hooks: bootstrap
	.venv/bin/python -m tools.demo

# Every env of tox.ini's envlist, side by side (they share the machine's
# run lock, see conftest.py); then how long each env and its slowest
# tests took.
test: bootstrap
	.venv/bin/tox run-parallel --parallel all --parallel-no-spinner
	.venv/bin/python tools/slowest_tests.py --top 10
