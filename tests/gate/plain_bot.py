"""The release gate's bot with no plugin (the plugin set ``none``): a bot as the README's first lines show it,
instructions only; each platform brings its reply."""

from core import Bot

bot = Bot(name="plain", instructions="Answer the person briefly and kindly. Remember what they told you.")
