# The two commands of README.rst. Both set up what they need first.
.PHONY: bootstrap demo test

bootstrap:
	./tools/bootstrap.sh

demo: bootstrap
	.venv/bin/python tools/demo.py

test: bootstrap
	.venv/bin/tox
