"""The bot's own messages (errors, notices, command answers) in each language a chat may choose.

Every message has an English text; each other language gives all of them (a test checks the catalog is
complete and the placeholders agree). ``say(key, language, **values)`` picks the chat's language and falls
back to English. Texts an operator set in the environment (``DISCORD_ERROR_MESSAGE``, ``*_HELP_TEXT``) are
the operator's words and are used as written, whatever the chat's language.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ("LANGUAGE_NAMES", "MESSAGES", "localized", "say")

LANGUAGE_NAMES: Mapping[str, str] = {"en": "English", "fr": "Français"}
"""The languages of the bot's own messages, by code, in their own words."""

_EN: dict[str, str] = {
    "discord.error": (
        "Sorry, I can't answer right now: my language model is not responding. Please try again in a moment."
    ),
    "discord.help": (
        "Talk to me in a DM, or mention me (or reply to one of my messages) in a server channel. Each channel and "
        "each thread is its own conversation. /stop stops the answer I am writing; /reset makes me forget this "
        "channel's conversation; /forget also erases its whole history; /settings shows "
        "its settings (/model, /persona, /language, /reply, /timezone), /reminders its reminders, /stats your usage."
    ),
    "telegram.help": (
        "Hi! I am {name}. Write to me here and I will answer. In a group, mention me, reply to one of my messages "
        "or use a command.\n\n/help shows this text\n/stop stops the answer I am writing\n"
        "/reset makes me forget this chat\n/forget erases this chat "
        "and its whole history\n/settings shows this "
        "chat's settings (/model, /persona, /language, /reply, /timezone)\n/reminders lists this chat's reminders\n"
        "/stats shows your usage"
    ),
    "run_failed": "Sorry, something went wrong while I was answering. Please try again.",
    "model_down": (
        "Sorry, I can't answer right now: the language model is not responding. Please try again in a minute."
    ),
    "no_answer": "Sorry, I could not put an answer together for that. Please try again or rephrase it.",
    "busy": "I'm answering too many messages right now. Please send that again in a minute.",
    "web.too_many_visitors": "Too many new conversations were started from your address in the last hour. "
    "Please try again later, or keep this browser's cookies to go on with yours.",
    "reset_done": "Done: I forgot everything about this conversation.",
    "forget_done": "Done: I erased this conversation: its history, summary, facts and state are deleted.",
    "stop_done": "Stopped: I left the answer where it was.",
    "stop_nothing": "I am not writing an answer here, so there is nothing to stop.",
    "stop_not_yours": "Only the people I am answering and the chat's admins can stop this answer.",
    "stop_button": "Stop",
    "not_ready": "I am not ready yet; try again in a moment.",
    "not_served": "I don't talk in this channel, so there is nothing to change here.",
    "nothing_to_forget": "I don't talk in this channel, so there is nothing to forget.",
    "discord.reset_refused": "Only members who may manage messages here can make me forget this conversation.",
    "command_failed": "Sorry, that did not work. Please try again.",
    "disabled": "/{command} is turned off on this bot.",
    "not_allowed": "Sorry, only this chat's admins can change the {setting} here.",
    "action_refused": "⛔ I did not use {action}: it is for the {needed} tier and above here, and you are {tier}.",
    "action_refused_nobody": "⛔ I did not use {action}: nobody may use it here.",
    "approval.request": (
        "🔐 Approval needed: {who} asked me to use {name} with {arguments}\n"
        "An admin may approve or deny it (it expires in {minutes} min)."
    ),
    "approval.request_markdown": (
        "🔐 Approval needed in this conversation: {who} asked me to use `{name}` with `{arguments}`\n"
        "An admin may approve or deny it (it expires in {minutes} min)."
    ),
    "approval.someone": "someone",
    "approval.an_admin": "an admin",
    "approval.approve": "Approve",
    "approval.deny": "Deny",
    "approval.expired": "⌛ Expired: nobody answered in time; it was not run.",
    "approval.withdrawn": "⏹ Withdrawn: the answer that asked for it was stopped; it was not run.",
    "approval.denied": "❌ Denied by {who}; it was not run.",
    "approval.approved": "✅ Approved by {who}.",
    "approval.not_allowed": "⛔ Only the chat's admins may approve or deny this request.",
    "approval.unknown": "This request is no longer known.",
    "approval.runs_now": "Approved: it runs now.",
    "approval.will_not_run": "Denied: it will not run.",
    "approval.already": "This request was already {status}.",
    "approval.status.pending": "pending",
    "approval.status.approved": "approved",
    "approval.status.denied": "denied",
    "approval.status.expired": "expired",
    "approval.status.withdrawn": "withdrawn",
    "approval.status.running": "running",
    "approval.status.settled": "settled",
    "pinned": "The operator fixed the {setting} of this chat, so it can't be changed from here.",
    "setting.model": "model",
    "setting.persona": "persona",
    "setting.language": "language",
    "setting.reply": "reply policy",
    "model_now": "This chat uses the model {model}.",
    "model_choose": "This chat uses the model {model}. Choose another one: {choices}",
    "model_only": "This bot has one model: {model}.",
    "model_set": "Done: this chat now uses {model}.",
    "model_unknown": "{model} is not one of the models you can choose: {choices}",
    "persona_show": "The persona of this chat:\n{persona}",
    "persona_default": "This chat uses the bot's own persona.",
    "persona_set": "Done: this chat has a new persona ({length} characters).",
    "persona_reset": "Done: this chat is back to the bot's own persona.",
    "persona_too_long": "That persona is too long: {length} characters, at most {limit}.",
    "persona_empty": "Write the persona after the command, for example: /persona set You are a pirate.",
    "language_now": "I write my messages in {language}. Choose another language: {choices}",
    "language_set": "Done: I will write my messages in English.",
    "language_unknown": "{language} is not a language I can write my messages in: {choices}",
    "reply_now": "In this chat I answer {policy}. Choose: {choices}",
    "reply_set": "Done: in this chat I now answer {policy}.",
    "reply_unknown": "{policy} is not a choice here: {choices}",
    "reply.always": "every message",
    "reply.mention": "when I am mentioned, replied to or given a command",
    "reply.default": "as the bot is set up (the operator's default)",
    "setting.voice": "spoken replies",
    "voice_now": "Spoken replies in this chat: {policy}. Choose: {choices}",
    "voice_set": "Done: spoken replies in this chat: {policy}.",
    "voice_unknown": "{policy} is not a choice here: {choices}",
    "voice.on": "every answer is also spoken",
    "voice.off": "never, not even to a voice message",
    "voice.default": "answers to voice messages are spoken (the bot's default)",
    "voice.unavailable": "This bot speaks no answers: its operator set no speech engine (TTS_BASE_URL or TTS_ENGINE).",
    "setting.busy": "what a message sent while I answer does",
    "busy_now": "A message sent here while I answer: {policy}. Choose: {choices}",
    "busy_set": "Done: a message sent here while I answer: {policy}.",
    "busy_unknown": "{policy} is not a choice here: {choices}",
    "busy.steer": "steer (the answer being written reads it before its next step)",
    "busy.collect": "collect (they wait, and my next answer takes all of them together)",
    "busy.queue": "queue (each gets an answer of its own, in order)",
    "busy.interrupt": "interrupt (the answer being written stops and I answer again with everything)",
    "busy.default": "as the bot is set up: {policy}",
    "setting.quiet": "quiet window",
    "quiet_now": (
        "Quiet window here: {window}. Messages sent within it of each other are answered together (0: each at once). "
        "Change it with /quiet and a number of milliseconds up to {max} (/quiet default: the bot's)."
    ),
    "quiet_set": "Done: messages sent here within {window} of each other are answered together.",
    "quiet_off": "Done: each message here is answered at once.",
    "quiet_unknown": "{window} is not a choice: write a number of milliseconds from 0 to {max}, or default.",
    "quiet.ms": "{ms} ms",
    "settings": (
        "Settings of this chat\nModel: {model}\nPersona: {persona}\nLanguage: {language}\nIn groups I answer: {reply}"
        "\nTime zone: {timezone}\nA message sent while I answer: {busy}\nQuiet window: {quiet}"
    ),
    "setting.timezone": "time zone",
    "timezone_now": (
        "This chat's time zone is {zone}: reminders are set in it. Change it with /timezone and an IANA name, "
        "for example /timezone Europe/Paris (/timezone default: the bot's)."
    ),
    "timezone_set": "Done: this chat's time zone is now {zone}.",
    "timezone_unknown": (
        "{zone} is not a time zone I know: write an IANA name such as Europe/Paris, America/New_York or UTC."
    ),
    "reminders_none": "No reminders or scheduled messages in this chat.",
    "reminders_list": "Reminders and scheduled messages in this chat ({count}):\n{items}",
    "reminders_more": "… and {count} more",
    "reminders_cancel_label": "Cancel {id}",
    "reminders_cancelled": "Cancelled {id}.",
    "reminders_unknown": "There is no reminder {id} in this chat; /reminders lists them.",
    "reminders_not_yours": "Only whoever set {id} and this chat's admins can cancel it.",
    "reminders_usage": "/reminders lists this chat's reminders; /reminders cancel <id> cancels one.",
    "reminders_unavailable": "This bot keeps no reminders.",
    "reminders.once": "once",
    "reminders.cron": "cron {cron}",
    "reminders.every_day": "every {n} day(s)",
    "reminders.every_hour": "every {n} hour(s)",
    "reminders.every_minute": "every {n} minute(s)",
    "reminders.every_second": "every {n} second(s)",
    "reminders.text": "[posted as written] ",
    "reminders.operator": "the operator",
    "memory_none": "I keep nothing about you: no facts, no reminders.",
    "memory_list": "What I keep about you ({count}):\n{items}",
    "memory.fact": "{n}. Fact ({where}, {scope}): {text}",
    "memory.reminder": "{n}. Reminder ({where}): {text}",
    "memory.here": "here",
    "memory.private": "only for you",
    "memory.group": "for everyone there",
    "memory_usage": (
        "Your usage: today {today} tokens (about ${cost_today}), last 30 days {month} tokens (about ${cost_month}). "
        "These counts are kept {days} days for the limits; /memory does not delete them."
    ),
    "memory_how": (
        "/memory delete <number> deletes one item; /memory delete all deletes every fact and reminder of yours."
    ),
    "memory_usage_hint": (
        "/memory lists what I keep about you; /memory delete <number> or /memory delete all deletes it."
    ),
    "memory_unknown": "There is no item {n}; /memory lists them with their numbers.",
    "memory_deleted": "Deleted: {item}",
    "memory_deleted_all": "Deleted everything I kept about you: {facts} fact(s) and {reminders} reminder(s).",
    "memory_unavailable": "This bot keeps nothing about people.",
    "memory_sent_privately": "I sent you what I keep about you in our private chat.",
    "memory_private_only": (
        "I don't show what I keep about you in a group: write /memory to me in a private chat (start one with me "
        "first)."
    ),
    "settings_default_persona": "the bot's own",
    "pinned_mark": " (fixed by the operator)",
    "stats": (
        "Your usage today: {user_in} tokens in, {user_out} out, about ${user_cost}\n"
        "Your last 30 days: {user_in_30} in, {user_out_30} out, about ${user_cost_30}\n"
        "This chat today: {chat_in} in, {chat_out} out, about ${chat_cost}\n"
        "This chat, last 30 days: {chat_in_30} in, {chat_out_30} out, about ${chat_cost_30}"
    ),
    "stats_cached": (
        "Of this chat's tokens in, read from the model provider's cache (billed at a discount): {cached} today "
        "({uncached} not), {cached_30} over 30 days ({uncached_30} not)"
    ),
}

_FR: dict[str, str] = {
    "discord.error": (
        "Désolé, je ne peux pas répondre pour l'instant : mon modèle de langue ne répond pas. Réessayez dans un "
        "instant."
    ),
    "discord.help": (
        "Parlez-moi en message privé, ou mentionnez-moi (ou répondez à l'un de mes messages) dans un salon. Chaque "
        "salon et chaque fil est une conversation à part. /stop arrête la réponse que j'écris ; /reset me fait "
        "oublier la conversation de ce salon ; "
        "/forget efface aussi tout son historique ; "
        "/settings montre ses réglages (/model, /persona, /language, /reply, /timezone), /reminders ses rappels, "
        "/stats votre usage."
    ),
    "telegram.help": (
        "Bonjour ! Je suis {name}. Écrivez-moi ici et je répondrai. Dans un groupe, mentionnez-moi, répondez à l'un "
        "de mes messages ou utilisez une commande.\n\n/help affiche ce texte\n/stop arrête la réponse que j'écris\n"
        "/reset me fait oublier ce chat\n"
        "/forget efface ce chat et tout son historique\n"
        "/settings montre les réglages de ce chat (/model, /persona, /language, /reply, /timezone)\n"
        "/reminders liste les rappels de ce chat\n/stats montre votre usage"
    ),
    "run_failed": "Désolé, un problème est survenu pendant ma réponse. Réessayez, s'il vous plaît.",
    "model_down": (
        "Désolé, je ne peux pas répondre pour l'instant : le modèle de langue ne répond pas. Réessayez dans une minute."
    ),
    "no_answer": "Désolé, je n'ai pas réussi à formuler une réponse. Réessayez ou reformulez, s'il vous plaît.",
    "busy": "Je réponds à trop de messages en ce moment. Renvoyez-le dans une minute, s'il vous plaît.",
    "web.too_many_visitors": "Trop de nouvelles conversations ont été ouvertes depuis votre adresse cette dernière "
    "heure. Réessayez plus tard, ou gardez les cookies de ce navigateur pour reprendre la vôtre.",
    "reset_done": "C'est fait : j'ai tout oublié de cette conversation.",
    "forget_done": "C'est fait : j'ai effacé cette conversation : son historique, son résumé, ses faits et son état.",
    "stop_done": "Arrêté : j'ai laissé la réponse où elle en était.",
    "stop_nothing": "Je n'écris pas de réponse ici, il n'y a donc rien à arrêter.",
    "stop_not_yours": "Seules les personnes à qui je réponds et les admins du salon peuvent arrêter cette réponse.",
    "stop_button": "Arrêter",
    "not_ready": "Je ne suis pas encore prêt ; réessayez dans un instant.",
    "not_served": "Je ne parle pas dans ce salon, il n'y a donc rien à changer ici.",
    "nothing_to_forget": "Je ne parle pas dans ce salon, il n'y a donc rien à oublier.",
    "discord.reset_refused": (
        "Seuls les membres qui peuvent gérer les messages ici peuvent me faire oublier cette conversation."
    ),
    "command_failed": "Désolé, cela n'a pas marché. Réessayez, s'il vous plaît.",
    "disabled": "/{command} est désactivée sur ce bot.",
    "not_allowed": "Désolé, seuls les administrateurs de ce chat peuvent changer ce réglage ({setting}) ici.",
    "action_refused": (
        "⛔ Je n'ai pas utilisé {action} : ici c'est réservé au niveau {needed} et au-dessus, et vous êtes {tier}."
    ),
    "action_refused_nobody": "⛔ Je n'ai pas utilisé {action} : personne ne peut l'utiliser ici.",
    "approval.request": (
        "🔐 Approbation requise : {who} m'a demandé d'utiliser {name} avec {arguments}\n"
        "Un administrateur peut l'approuver ou la refuser (elle expire dans {minutes} min)."
    ),
    "approval.request_markdown": (
        "🔐 Approbation requise dans cette conversation : {who} m'a demandé d'utiliser `{name}` avec `{arguments}`\n"
        "Un administrateur peut l'approuver ou la refuser (elle expire dans {minutes} min)."
    ),
    "approval.someone": "quelqu'un",
    "approval.an_admin": "un administrateur",
    "approval.approve": "Approuver",
    "approval.deny": "Refuser",
    "approval.expired": "⌛ Expirée : personne n'a répondu à temps ; elle n'a pas été exécutée.",
    "approval.withdrawn": "⏹ Retirée : la réponse qui l'a demandée a été arrêtée ; elle n'a pas été exécutée.",
    "approval.denied": "❌ Refusée par {who} ; elle n'a pas été exécutée.",
    "approval.approved": "✅ Approuvée par {who}.",
    "approval.not_allowed": "⛔ Seuls les administrateurs de ce chat peuvent approuver ou refuser cette demande.",
    "approval.unknown": "Cette demande n'est plus connue.",
    "approval.runs_now": "Approuvée : elle s'exécute maintenant.",
    "approval.will_not_run": "Refusée : elle ne sera pas exécutée.",
    "approval.already": "Cette demande est déjà {status}.",
    "approval.status.pending": "en attente",
    "approval.status.approved": "approuvée",
    "approval.status.denied": "refusée",
    "approval.status.expired": "expirée",
    "approval.status.withdrawn": "retirée",
    "approval.status.running": "en cours d'exécution",
    "approval.status.settled": "réglée",
    "pinned": "L'opérateur a fixé ce réglage ({setting}) pour ce chat : il ne peut pas être changé d'ici.",
    "setting.model": "modèle",
    "setting.persona": "persona",
    "setting.language": "langue",
    "setting.reply": "règle de réponse",
    "model_now": "Ce chat utilise le modèle {model}.",
    "model_choose": "Ce chat utilise le modèle {model}. Choisissez-en un autre : {choices}",
    "model_only": "Ce bot n'a qu'un modèle : {model}.",
    "model_set": "C'est fait : ce chat utilise maintenant {model}.",
    "model_unknown": "{model} ne fait pas partie des modèles proposés : {choices}",
    "persona_show": "Le persona de ce chat :\n{persona}",
    "persona_default": "Ce chat utilise le persona du bot.",
    "persona_set": "C'est fait : ce chat a un nouveau persona ({length} caractères).",
    "persona_reset": "C'est fait : ce chat reprend le persona du bot.",
    "persona_too_long": "Ce persona est trop long : {length} caractères, au plus {limit}.",
    "persona_empty": "Écrivez le persona après la commande, par exemple : /persona set Tu es un pirate.",
    "language_now": "J'écris mes messages en {language}. Choisissez une autre langue : {choices}",
    "language_set": "C'est fait : j'écrirai mes messages en français.",
    "language_unknown": "{language} n'est pas une langue dans laquelle j'écris mes messages : {choices}",
    "reply_now": "Dans ce chat je réponds {policy}. Choisissez : {choices}",
    "reply_set": "C'est fait : dans ce chat je réponds maintenant {policy}.",
    "reply_unknown": "{policy} n'est pas un choix possible ici : {choices}",
    "reply.always": "à chaque message",
    "reply.mention": "quand on me mentionne, me répond ou me donne une commande",
    "reply.default": "comme le bot est configuré (le réglage de l'opérateur)",
    "setting.voice": "réponses parlées",
    "voice_now": "Réponses parlées dans ce chat : {policy}. Choisissez : {choices}",
    "voice_set": "C'est fait : réponses parlées dans ce chat : {policy}.",
    "voice_unknown": "{policy} n'est pas un choix possible ici : {choices}",
    "voice.on": "chaque réponse est aussi dite à voix haute",
    "voice.off": "jamais, même à un message vocal",
    "voice.default": "les réponses aux messages vocaux sont dites à voix haute (le réglage du bot)",
    "voice.unavailable": (
        "Ce bot ne dit aucune réponse à voix haute : son opérateur n'a configuré aucune synthèse vocale "
        "(TTS_BASE_URL ou TTS_ENGINE)."
    ),
    "setting.busy": "ce que fait un message envoyé pendant que je réponds",
    "busy_now": "Un message envoyé ici pendant que je réponds : {policy}. Choisissez : {choices}",
    "busy_set": "C'est fait : un message envoyé ici pendant que je réponds : {policy}.",
    "busy_unknown": "{policy} n'est pas un choix possible ici : {choices}",
    "busy.steer": "steer (la réponse en cours le lit avant son étape suivante)",
    "busy.collect": "collect (ils attendent, et ma réponse suivante les prend tous ensemble)",
    "busy.queue": "queue (chacun a sa propre réponse, dans l'ordre)",
    "busy.interrupt": "interrupt (la réponse en cours s'arrête et je réponds de nouveau à tout)",
    "busy.default": "comme le bot est configuré : {policy}",
    "setting.quiet": "fenêtre de calme",
    "quiet_now": (
        "Fenêtre de calme ici : {window}. Les messages envoyés à moins de cet intervalle reçoivent une seule réponse "
        "(0 : chacun tout de suite). Changez-la avec /quiet et un nombre de millisecondes jusqu'à {max} "
        "(/quiet default : celle du bot)."
    ),
    "quiet_set": "C'est fait : les messages envoyés ici à moins de {window} d'intervalle reçoivent une seule réponse.",
    "quiet_off": "C'est fait : chaque message ici reçoit une réponse tout de suite.",
    "quiet_unknown": "{window} n'est pas un choix : écrivez un nombre de millisecondes de 0 à {max}, ou default.",
    "quiet.ms": "{ms} ms",
    "settings": (
        "Réglages de ce chat\nModèle : {model}\nPersona : {persona}\nLangue : {language}\n"
        "Dans les groupes je réponds : {reply}\nFuseau horaire : {timezone}\n"
        "Un message envoyé pendant que je réponds : {busy}\nFenêtre de calme : {quiet}"
    ),
    "setting.timezone": "fuseau horaire",
    "timezone_now": (
        "Le fuseau horaire de ce chat est {zone} : les rappels y sont lus. Changez-le avec /timezone et un nom "
        "IANA, par exemple /timezone Europe/Paris (/timezone default : celui du bot)."
    ),
    "timezone_set": "C'est fait : le fuseau horaire de ce chat est maintenant {zone}.",
    "timezone_unknown": (
        "{zone} n'est pas un fuseau horaire que je connais : écrivez un nom IANA comme Europe/Paris, "
        "America/New_York ou UTC."
    ),
    "reminders_none": "Aucun rappel ni message programmé dans ce chat.",
    "reminders_list": "Rappels et messages programmés de ce chat ({count}) :\n{items}",
    "reminders_more": "… et {count} de plus",
    "reminders_cancel_label": "Annuler {id}",
    "reminders_cancelled": "{id} est annulé.",
    "reminders_unknown": "Il n'y a pas de rappel {id} dans ce chat ; /reminders les liste.",
    "reminders_not_yours": "Seuls la personne qui a créé {id} et les administrateurs de ce chat peuvent l'annuler.",
    "reminders_usage": "/reminders liste les rappels de ce chat ; /reminders cancel <id> en annule un.",
    "reminders_unavailable": "Ce bot ne garde pas de rappels.",
    "reminders.once": "une fois",
    "reminders.cron": "cron {cron}",
    "reminders.every_day": "tous les {n} jour(s)",
    "reminders.every_hour": "toutes les {n} heure(s)",
    "reminders.every_minute": "toutes les {n} minute(s)",
    "reminders.every_second": "toutes les {n} seconde(s)",
    "reminders.text": "[publié tel quel] ",
    "reminders.operator": "l'opérateur",
    "memory_none": "Je ne garde rien sur vous : aucun fait, aucun rappel.",
    "memory_list": "Ce que je garde sur vous ({count}) :\n{items}",
    "memory.fact": "{n}. Fait ({where}, {scope}) : {text}",
    "memory.reminder": "{n}. Rappel ({where}) : {text}",
    "memory.here": "ici",
    "memory.private": "pour vous seul",
    "memory.group": "pour tout le monde là-bas",
    "memory_usage": (
        "Votre usage : aujourd'hui {today} jetons (environ {cost_today} $), 30 derniers jours {month} jetons "
        "(environ {cost_month} $). Ces comptes sont gardés {days} jours pour les limites ; /memory ne les efface pas."
    ),
    "memory_how": ("/memory delete <numéro> en efface un ; /memory delete all efface tous vos faits et rappels."),
    "memory_usage_hint": (
        "/memory liste ce que je garde sur vous ; /memory delete <numéro> ou /memory delete all l'efface."
    ),
    "memory_unknown": "Il n'y a pas d'élément {n} ; /memory les liste avec leurs numéros.",
    "memory_deleted": "Effacé : {item}",
    "memory_deleted_all": "J'ai effacé tout ce que je gardais sur vous : {facts} fait(s) et {reminders} rappel(s).",
    "memory_unavailable": "Ce bot ne garde rien sur les personnes.",
    "memory_sent_privately": "Je vous ai envoyé ce que je garde sur vous dans notre chat privé.",
    "memory_private_only": (
        "Je ne montre pas ce que je garde sur vous dans un groupe : écrivez /memory dans un chat privé avec moi "
        "(commencez-en un d'abord)."
    ),
    "settings_default_persona": "celui du bot",
    "pinned_mark": " (fixé par l'opérateur)",
    "stats": (
        "Votre usage aujourd'hui : {user_in} jetons en entrée, {user_out} en sortie, environ {user_cost} $\n"
        "Vos 30 derniers jours : {user_in_30} en entrée, {user_out_30} en sortie, environ {user_cost_30} $\n"
        "Ce chat aujourd'hui : {chat_in} en entrée, {chat_out} en sortie, environ {chat_cost} $\n"
        "Ce chat, 30 derniers jours : {chat_in_30} en entrée, {chat_out_30} en sortie, environ {chat_cost_30} $"
    ),
    "stats_cached": (
        "Des jetons en entrée de ce chat, lus dans le cache du fournisseur du modèle (facturés moins cher) : "
        "{cached} aujourd'hui ({uncached} non), {cached_30} sur 30 jours ({uncached_30} non)"
    ),
}

MESSAGES: Mapping[str, Mapping[str, str]] = {"en": _EN, "fr": _FR}
"""Every message by language code, then by key."""


def say(key: str, language: str | None = None, /, **values: object) -> str:
    """The message ``key`` in ``language`` (English when the language or the message is missing), with
    ``values`` filled in."""
    catalog = MESSAGES.get(language or "en", _EN)
    template = catalog.get(key) or _EN[key]
    return template.format(**values) if values else template


def localized(text: str, key: str, language: str | None) -> str:
    """An operator's text in the chat's language: ``text`` itself when the operator wrote it, the catalog's
    ``key`` in ``language`` when ``text`` is still the English default."""
    return say(key, language) if text == _EN[key] else text
