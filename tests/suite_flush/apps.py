from django.apps import AppConfig


class SuiteFlushConfig(AppConfig):
    name = "tests.suite_flush"
    label = "suite_flush"
