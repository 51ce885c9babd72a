"""The runs app's run kinds: generation, log-likelihood choice scoring, and evaluating every
model on new data (which starts generation runs). Each kind's plug-in is named in the one
registry of kinds, settings.RUN_KINDS; nothing here registers itself on import, and the engine
(apps.runs.engine) imports none of these modules."""
