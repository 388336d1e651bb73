"""Settings of ``bench/floor_asgi.py``: the project's (database, channel layer, apps), with
its middleware less what serves the app's own pages (static files, htmx), which leaves
Django's ``startproject`` chain run in one thread as the app's is, and the floor's own
URLconf."""

from project.settings import *  # noqa: F403
from project.settings import MIDDLEWARE as APP_MIDDLEWARE

MIDDLEWARE = [
    name
    for name in APP_MIDDLEWARE
    if name
    not in {"whitenoise.middleware.WhiteNoiseMiddleware", "django_htmx.middleware.HtmxMiddleware"}
]
ROOT_URLCONF = "bench.floor_asgi"
ASGI_APPLICATION = "bench.floor_asgi.application"
