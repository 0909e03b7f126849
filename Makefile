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

test: bootstrap
	.venv/bin/tox
