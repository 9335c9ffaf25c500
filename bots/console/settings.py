"""Operator settings of the console (``CONSOLE_*``)."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, field_validator

from extensions.web.settings import listen_address

__all__ = ("DEFAULT_CONSOLE_PORT", "ConsoleSettings")

DEFAULT_CONSOLE_PORT = 8766
"""The console's port when ``CONSOLE_PORT`` is not set."""


class ConsoleSettings(BaseModel):
    """``CONSOLE_*`` environment variables."""

    secret: SecretStr | None = Field(
        default=None,
        description="The operator console's password, 16 characters or more; empty: no console is served (secret)",
    )
    host: str = Field(
        default="127.0.0.1",
        description="Address of the console; on a loopback address only requests from this machine are answered",
    )
    port: int = Field(default=DEFAULT_CONSOLE_PORT, ge=0, le=65535, description="Port of the console (0: off)")
    session_hours: float = Field(
        default=12.0, gt=0, le=24 * 30, description="Hours an operator stays logged in to the console"
    )
    secure_cookies: bool = Field(
        default=False, description="Send the console's session cookie over HTTPS only (set it behind HTTPS)"
    )

    @field_validator("host")
    @classmethod
    def _an_address(cls, value: str) -> str:
        return listen_address(value)

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and 0 < len(value.get_secret_value().strip()) < 16:
            raise ValueError(
                "CONSOLE_SECRET is too short: give it 16 characters or more (or leave it empty: no console)"
            )
        return value if value is not None and value.get_secret_value().strip() else None  # blank: no console
