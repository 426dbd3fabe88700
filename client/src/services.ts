/**
 * The client services this bundle uses, and what degrades without each — pure, so the
 * report a page without some service gets is testable without a browser.
 */

/** One service the plugin uses. */
export interface ServiceUse {
  /** Service name (as `ctx.get` takes it). */
  readonly name: string
  /** What degrades without it (the console warning's tail). */
  readonly without: string
  /** Another service that stands in for it: no warning while that one is there. */
  readonly unless?: string
}

/** Every service the plugin uses; none is a required inject. */
export const SERVICES: readonly ServiceUse[] = [
  { name: 'slots', without: 'no ↶ buttons, dialog, banner or settings pages are shown' },
  { name: 'sessions', without: 'the session on screen is taken from the session header; a fork cannot switch to its new session' },
  { name: 'remote.commands', unless: 'remote', without: 'rewinds and forks cannot run (the dialog says so)' },
  { name: 'conversationEvents', unless: 'uiConversation', without: "rewind markers are read from the host's rewind history instead of the session log" },
  { name: 'commandUi', without: '/rewind and /undo open no candidate picker' },
  { name: 'conversation', without: 'the composer is refilled through its text area, without images' },
  { name: 'locale', without: 'the plugin follows the browser language' },
  { name: 'settingsScope', without: 'the stored DSH language preference is not read' },
]

/** What a page offers, as the warnings need it. */
export interface PageState {
  /** @param name - service name. @returns whether the page has it. */
  has(name: string): boolean
  /** Where the marker Definition went, if anywhere. */
  readonly markerRegistry: string | undefined
  /** Whether the session on screen (if any) has a chat to read. */
  readonly chatReadable: boolean
}

/**
 * The services a page lacks.
 * @param has - whether the page has a service.
 * @returns their names, in {@link SERVICES} order.
 */
export function missingServices(has: (name: string) => boolean): string[] {
  return SERVICES.filter(s => !has(s.name)).map(s => s.name)
}

/**
 * The console warnings for a page: one per missing service without a stand-in, one when no
 * event registry took the marker Definition, one when the session on screen has no chat.
 * @param page - what the page offers.
 * @returns the warnings (without the `[dsh-prompt-rewind]` prefix).
 */
export function missingWarnings(page: PageState): string[] {
  const out: string[] = []
  for (const s of SERVICES) {
    if (page.has(s.name) || (s.unless !== undefined && page.has(s.unless))) continue
    out.push(`client service "${s.name}" is missing: ${s.without}`)
  }
  if (page.markerRegistry === undefined) {
    out.push("no client event registry (conversationEvents, uiConversation.events): rewound rows are hidden only when the host's rewind history names their markers")
  }
  if (!page.chatReadable) {
    out.push('no chat to read (neither the session face\'s chat nor the uiConversation "chat" view): ↶ buttons cannot open the dialog and rewound rows stay visible')
  }
  return out
}
