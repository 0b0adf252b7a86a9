"""Typed, validated configuration loaded from .env, a profile overlay, the environment and task flags."""

from nsyskit.config.load import PROFILE_ENV, available_profiles, load_config
from nsyskit.config.schema import SECTIONS, Config, key_of, settings

__all__ = ["PROFILE_ENV", "SECTIONS", "Config", "available_profiles", "key_of", "load_config", "settings"]
