() => {
  // An [n] in an answer is a link to "#cite-<n>-<kind>-<id>": show that source's passage beside the chat instead
  // of following the link (the hidden box and button of the passage view carry the reference to the server).
  document.addEventListener("click", (event) => {
    const link = event.target.closest ? event.target.closest('a[href^="#cite-"]') : null;
    if (!link) return;
    event.preventDefault();
    event.stopPropagation();
    const box = document.querySelector("#source-ref textarea, #source-ref input");
    const button = document.querySelector("#show-ref");
    if (!box || !button) return;
    box.value = link.getAttribute("href").slice("#cite-".length);
    box.dispatchEvent(new Event("input", { bubbles: true }));
    setTimeout(() => {
      button.click();
      const view = document.querySelector("#passage-view");
      if (view) view.scrollIntoView({ block: "nearest", behavior: "smooth" });
    }, 50);
  }, true);
}
