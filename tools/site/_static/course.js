/* The web edition's own behaviour (tools/site/conf.py loads it on every page).
 *
 * 1. The language switch keeps the reader's section: every heading has an anchor `sec-<cell id>-<k>`
 *    (tools/make_site.py: add_section_anchors), the same in both editions; a click on the switch adds
 *    the anchor of the section in the address (#...) or, without one, of the section on screen.
 * 2. Search: the words Sphinx 8.2's search page lacks in Chinese, and result snippets without the raw
 *    LaTeX of formulas (nor the print-only table of contents).
 */
"use strict";

(() => {
  const STABLE = /^sec-/;

  /** The stable anchor of the section holding ``element`` (its own id, or a marker span inside it). */
  const stableAnchor = (element) => {
    for (let section = element && element.closest("section"); section; section = section.parentElement.closest("section")) {
      if (STABLE.test(section.id)) return section.id;
      const marker = [...section.children].find((child) => STABLE.test(child.id));
      if (marker) return marker.id;
    }
    return null;
  };

  /** The section the reader is at: the one in the address, else the last one whose top is on screen's top part. */
  const currentSection = () => {
    const hashed = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (hashed) return hashed;
    let seen = null;
    for (const section of document.querySelectorAll("article section")) {
      if (section.getBoundingClientRect().top <= window.innerHeight / 4) seen = section;
    }
    return seen;
  };

  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a.course-language");
    if (!link) return;
    const anchor = stableAnchor(currentSection());
    link.href = link.href.split("#")[0] + (anchor ? "#" + anchor : "");
  }, true);

  // Search: Chinese for the messages Sphinx 8.2's zh_CN catalogue lacks (they are new in 8.2).
  const ZH = {
    "Search finished, found one page matching the search query.": ["搜索完成，找到 ${resultCount} 个匹配的页面。"],
    "Your search did not match any documents. Please make sure that all words are spelled correctly and that you've selected enough categories.":
      "没有找到匹配的页面。请检查拼写，或换一个关键词。",
  };
  const lang = (document.documentElement.lang || "").toLowerCase();
  const patchSearch = () => {
    if (lang.startsWith("zh") && typeof Documentation !== "undefined") {
      for (const [key, value] of Object.entries(ZH)) {
        if (!(key in Documentation.TRANSLATIONS)) Documentation.TRANSLATIONS[key] = value;
      }
    }
    // Snippets: drop formulas (their LaTeX source), the print-only contents and scripts before Sphinx
    // takes the text of the page.
    if (typeof Search !== "undefined" && Search.htmlToText && !Search.coursePatched) {
      const toText = Search.htmlToText;
      Search.htmlToText = (htmlString, anchor) => {
        const page = new DOMParser().parseFromString(htmlString, "text/html");
        page.querySelectorAll(".math, mjx-container, .onlyprint, #jb-print-docs-body, script, style")
          .forEach((element) => element.replaceWith(element.matches(".math, mjx-container") ? "…" : ""));
        return toText(page.documentElement.outerHTML, anchor);
      };
      Search.coursePatched = true;
    }
  };
  patchSearch();
  document.addEventListener("DOMContentLoaded", patchSearch);
})();
