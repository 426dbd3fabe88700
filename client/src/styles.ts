/** The bundle's stylesheet, injected once as a `<style>` element. DSH theme variables with fallbacks. */
export const CSS = `
.dshpr-msg-button{font:inherit;font-size:13px;line-height:1;min-width:24px;height:24px;padding:0 6px;border:0;border-radius:6px;background:transparent;color:var(--dsw-alias-label-secondary,#666);cursor:pointer}
.dshpr-msg-button:hover,.dshpr-msg-button:focus-visible{background:var(--dsw-alias-fill-secondary,rgba(0,0,0,.06));color:var(--dsw-alias-label-primary,#111)}
.dshpr-backdrop{position:fixed;inset:0;z-index:2147483000;display:flex;align-items:center;justify-content:center;background:rgba(0,0,0,.35)}
.dshpr-dialog{width:min(560px,92vw);max-height:84vh;overflow:auto;padding:20px 22px;border-radius:12px;background:var(--dsw-alias-bg-base,#fff);color:var(--dsw-alias-label-primary,#111);box-shadow:0 12px 40px rgba(0,0,0,.25);font:14px/1.5 system-ui,sans-serif}
.dshpr-title{margin:0 0 8px;font-size:17px;font-weight:600}
.dshpr-sub{margin:10px 0 4px;font-size:13px;font-weight:600}
.dshpr-body{margin:0 0 10px}
.dshpr-quote{margin:0 0 10px;padding:6px 10px;border-left:3px solid var(--dsw-alias-label-tertiary,#bbb);white-space:pre-wrap;max-height:120px;overflow:auto;color:var(--dsw-alias-label-secondary,#444)}
.dshpr-paths{margin:0;padding-left:18px;font-size:12.5px}
.dshpr-paths code{font-family:ui-monospace,monospace}
.dshpr-muted{color:var(--dsw-alias-label-secondary,#666)}
.dshpr-warn{color:#b45309}
.dshpr-error{color:#b91c1c}
.dshpr-ok{color:#15803d}
.dshpr-hint{margin:12px 0 0;font-size:12px;color:var(--dsw-alias-label-tertiary,#888)}
.dshpr-actions{display:flex;justify-content:flex-end;gap:8px;margin-top:12px}
.dshpr-btn{font:inherit;font-size:13px;padding:5px 12px;border-radius:8px;border:1px solid var(--dsw-alias-border-primary,#ccc);background:var(--dsw-alias-bg-base,#fff);color:inherit;cursor:pointer}
.dshpr-btn:disabled{opacity:.55;cursor:default}
.dshpr-btn:focus-visible{outline:2px solid #4a6cf7;outline-offset:2px}
.dshpr-primary{background:#2f54eb;border-color:#2f54eb;color:#fff}
.dshpr-danger{background:#b91c1c;border-color:#b91c1c;color:#fff}
.dshpr-section{display:flex;flex-direction:column;gap:10px;font-size:14px}
.dshpr-row{display:flex;flex-wrap:wrap;align-items:center;gap:8px}
.dshpr-entries{list-style:none;margin:0;padding:0;display:flex;flex-direction:column;gap:8px}
.dshpr-entry{padding:10px 12px;border:1px solid var(--dsw-alias-border-primary,#ddd);border-radius:10px;display:flex;flex-direction:column;gap:6px;align-items:flex-start}
.dshpr-badge{font-size:12px;font-weight:600;padding:1px 8px;border-radius:999px}
.dshpr-done{background:#dcfce7;color:#166534}
.dshpr-partial{background:#fef3c7;color:#92400e}
.dshpr-failed{background:#fee2e2;color:#991b1b}
.dshpr-card{padding:12px 14px;border:1px solid var(--dsw-alias-border-primary,#ddd);border-radius:10px;display:flex;flex-direction:column;gap:8px}
.dshpr-card-title{margin:0;font-size:15px;font-weight:600}
.dshpr-form{display:flex;flex-direction:column;gap:10px;border:0;margin:0;padding:0;min-width:0}
.dshpr-field{display:flex;gap:10px;align-items:flex-start}
.dshpr-number{align-items:center;justify-content:space-between;max-width:420px}
.dshpr-number input{width:90px;font:inherit;padding:3px 6px}
.dshpr-export{width:100%;box-sizing:border-box;font:12px ui-monospace,monospace}
.dshpr-details summary{cursor:pointer;color:var(--dsw-alias-label-secondary,#666)}
.dshpr-confirm{display:inline-flex;flex-wrap:wrap;gap:6px;align-items:center}
.dshpr-started{background:#e0e7ff;color:#3730a3}
.dshpr-rolled-back,.dshpr-abandoned{background:#f3f4f6;color:#374151}
.dshpr-banner{position:fixed;top:12px;left:50%;transform:translateX(-50%);z-index:2147482000;width:min(720px,94vw);box-sizing:border-box;display:flex;flex-wrap:wrap;align-items:center;gap:8px 12px;padding:10px 14px;border:1px solid #f59e0b;border-radius:10px;background:#fffbeb;color:#78350f;box-shadow:0 6px 24px rgba(0,0,0,.15);font:14px/1.45 system-ui,sans-serif}
.dshpr-banner-title{font-weight:600}
.dshpr-small{font-size:12px;padding:2px 8px}
.dshpr-choice{justify-content:space-between;margin:4px 0}
.dshpr-files{list-style:none;margin:0;padding:0;display:flex;flex-direction:column;gap:4px;font-size:12.5px}
.dshpr-file{display:flex;flex-direction:column;gap:4px}
.dshpr-file-row{display:flex;flex-wrap:wrap;align-items:center;gap:6px 10px}
.dshpr-file-label{display:inline-flex;align-items:center;gap:6px;min-width:0;word-break:break-all}
.dshpr-file code{font-family:ui-monospace,monospace}
.dshpr-file-name{all:unset;cursor:pointer;min-width:0;word-break:break-all;border-radius:3px}
.dshpr-file-name:hover code{text-decoration:underline}
.dshpr-file-name:focus-visible{outline:2px solid var(--dsw-alias-accent-primary,#4c7cf0);outline-offset:1px}
.dshpr-file[data-checked="false"] code{text-decoration:line-through;color:var(--dsw-alias-label-tertiary,#888)}
.dshpr-counts{font:12px ui-monospace,monospace}
.dshpr-add{color:#15803d}
.dshpr-del{color:#b91c1c}
.dshpr-origin{font-size:11.5px;font-weight:600;padding:0 6px;border-radius:999px;background:#fef3c7;color:#92400e}
.dshpr-kept{font-size:12px;padding-left:24px}
.dshpr-diff{margin:0 0 0 24px;padding:6px 8px;max-height:260px;overflow:auto;border-radius:6px;background:var(--dsw-alias-fill-secondary,#f6f8fa);font:12px/1.45 ui-monospace,monospace;white-space:pre;tab-size:4}
.dshpr-diff:focus-visible{outline:2px solid #4a6cf7}
.dshpr-line{display:block;min-height:1.45em}
.dshpr-line-add{background:rgba(34,197,94,.14)}
.dshpr-line-del{background:rgba(239,68,68,.14)}
.dshpr-line-hunk{color:var(--dsw-alias-label-tertiary,#888)}
.dshpr-diff-summary{margin-left:24px;font-size:12px;color:var(--dsw-alias-label-secondary,#555)}
.dshpr-entry-target{font-weight:500;max-width:100%;overflow:hidden;overflow-wrap:anywhere;display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical}
.dshpr-entry>.dshpr-row{max-width:100%}
.dshpr-tree{list-style:none;margin:0;padding:0 0 0 14px;border-left:2px solid var(--dsw-alias-border-primary,#ddd);display:flex;flex-direction:column;gap:4px;font-size:12.5px}
.dshpr-choose{display:flex;flex-direction:column;gap:6px;padding:8px 10px;border:1px dashed #f59e0b;border-radius:8px;width:100%;box-sizing:border-box}
.dshpr-choose label{display:inline-flex;align-items:center;gap:4px;font-size:12.5px}
.dshpr-banner-actions{display:inline-flex;gap:8px;margin-left:auto}
.dshpr-compat{display:flex;flex-direction:column;gap:3px;font-size:13px}
.dshpr-compat ul{margin:0;padding-left:18px;font-size:12.5px}
.dshpr-compat small{font-size:11.5px}
`
