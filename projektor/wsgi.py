import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "projektor.settings")
application = get_wsgi_application()
# Import every view now, at worker boot: left to the first request, loading the
# URLconf (the MCP SDK and its models above all) made that request take ~2 s.
get_resolver().check()
