"""Settings of ``bench/floor_asgi.py``: the project's (database, channel layer, apps), with
Django's ``startproject`` middleware, run in one thread as the app's is, and the floor's
own URLconf."""

from project.settings import *  # noqa: F403

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "project.middleware.SyncMiddlewareChain",
]
ROOT_URLCONF = "bench.floor_asgi"
ASGI_APPLICATION = "bench.floor_asgi.application"
