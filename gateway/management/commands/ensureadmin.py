"""``manage.py ensureadmin``: make sure a superuser exists, for ``make run`` on a fresh clone.

With ``DJANGO_SUPERUSER_USERNAME`` / ``DJANGO_SUPERUSER_PASSWORD`` the user is created or updated
(made an active superuser, password set). Without a password, ``admin`` (or the given username)
is created with a generated password that is printed once; when it already exists nothing changes.
"""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction


class Command(BaseCommand):
    help = "Ensure a superuser exists (DJANGO_SUPERUSER_USERNAME / DJANGO_SUPERUSER_PASSWORD, else admin)."

    def handle(self, *args, **options) -> None:
        users = get_user_model()
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME") or "admin"
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD") or ""
        with transaction.atomic():
            user = users.objects.filter(**{users.USERNAME_FIELD: username}).first()
            if password:
                if user is None:
                    users.objects.create_superuser(username, email="", password=password)
                    self.stdout.write(
                        f"Created superuser {username!r} (password from DJANGO_SUPERUSER_PASSWORD)."
                    )
                else:
                    user.is_staff = user.is_superuser = user.is_active = True
                    user.set_password(password)
                    user.save()
                    self.stdout.write(
                        f"Superuser {username!r} exists; password set from DJANGO_SUPERUSER_PASSWORD."
                    )
                return
            if user is not None:
                self.stdout.write(f"User {username!r} already exists; nothing to do.")
                return
            generated = secrets.token_urlsafe(12)
            users.objects.create_superuser(username, email="", password=generated)
        self.stdout.write(
            f"Created superuser {username!r} with password {generated}  (shown once: store it now)"
        )
