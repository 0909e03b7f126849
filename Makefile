# The two commands of README.rst. Both set up what they need first.
.PHONY: bootstrap demo test

bootstrap:
	./tools/bootstrap.sh

demo: bootstrap
	.venv/bin/python -m tools.demo

test: bootstrap
	.venv/bin/tox
