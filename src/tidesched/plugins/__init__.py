"""Scheduler plugins, one module per plugin, named as in the config (``capacity_card`` for
``capacity-card``); ``scheduler.PLUGINS`` registers each module's plugin class under its name."""
