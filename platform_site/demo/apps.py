from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo `make run` seeds and prints (commands seed_demo and demo_banner)."""

    name = "platform_site.demo"
    label = "demo"
    verbose_name = "Demo"
