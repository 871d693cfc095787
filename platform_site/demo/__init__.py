"""The demo `make run` starts with (seed_demo, demo_banner): not part of the
service, a way to try it."""
