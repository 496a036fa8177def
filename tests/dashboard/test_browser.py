"""The dashboard in a real browser (headless Chromium through Selenium): a
graph of a few hundred tasks with failures, the counts the page shows, a
failed task's detail, no error in the console, and a screenshot."""

import os
import shutil

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from conftest import graph_file, wait_until

SHOTS = os.environ.get("ZTASK_SCREENSHOT_DIR")


@pytest.fixture
def browser(tmp_path):
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not os.path.exists(chromium) or not os.path.exists(driver_path):
        pytest.fail("no chromium or chromedriver: run scripts/install-deps.sh")
    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--user-data-dir=%s" % (tmp_path / "chromium")):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def text(driver, element_id):
    """An element's text, read in one step: the page redraws its elements
    with each update, so a reference found first may be gone when read."""
    return driver.execute_script(
        "const e = document.getElementById(arguments[0]); return e ? e.innerText : '';", element_id)


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def shoot(driver, name, tmp_path):
    directory = SHOTS or str(tmp_path)
    os.makedirs(directory, exist_ok=True)
    driver.save_screenshot(os.path.join(directory, name))


def test_the_page_shows_a_graph_run_with_its_failures(make_cluster, browser, tmp_path):
    cluster = make_cluster(engines=2, extra=("--hwm", "4"))
    path, ok, failed = graph_file(tmp_path / "graph.json")
    browser.get(cluster.url)
    wait_until(lambda: "live" in text(browser, "status"), 30, "the page going live")

    out = cluster.taskctl("submit-graph", str(path)).stdout
    ids = [line.split()[1] for line in out.splitlines()]
    cluster.taskctl("wait", "--timeout", "120", *ids, check=False)
    records = cluster.records(ids)
    assert sum(r["status"] == "ok" for r in records) == ok
    assert sum(r["status"] == "error" for r in records) == failed

    # The page's counts come to the hub's.
    wait_until(lambda: text(browser, "count-ok") == str(ok) and
               text(browser, "count-failed") == str(failed), 30,
               "the page showing %d ok and %d failed" % (ok, failed))
    assert text(browser, "count-running") == "0"
    shoot(browser, "dashboard-overview.png", tmp_path)

    # The task stream draws; progress shows each label prefix.
    browser.get(cluster.base + "#stream")
    wait_until(lambda: "live" in text(browser, "status"), 30, "the page going live")
    shoot(browser, "dashboard-stream.png", tmp_path)
    browser.get(cluster.base + "#progress")
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, '.progress[data-prefix="map"]'), 30,
               "the map prefix's progress bar")
    bar = browser.execute_script(
        "return document.querySelector('.progress[data-prefix=\"map\"]').innerText")
    assert "195 ok" in bar and "5 failed" in bar and "200 submitted" in bar, bar

    # A failed task's detail, from the tasks table.
    browser.get(cluster.base + "#tasks")
    browser.find_element(By.CSS_SELECTOR, '#task-filter select[name="state"] option[value="failed"]').click()
    browser.find_element(By.CSS_SELECTOR, "#task-filter button").click()
    wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#task-table tr.task-row")) == failed,
               30, "the table listing the %d failures" % failed)
    failed_map = next(r for r in records if r["label"] == "map/7")
    row = browser.find_element(By.CSS_SELECTOR, 'tr.task-row[data-id="%s"]' % failed_map["id"])
    row.click()
    wait_until(lambda: browser.find_elements(By.ID, "detail-error"), 30, "the task's detail")
    assert text(browser, "detail-error").startswith("TaskFailed"), text(browser, "detail-error")
    shoot(browser, "dashboard-task.png", tmp_path)

    # Its dependents' detail links back to what they waited for.
    failed_reduce = next(r for r in records if r["label"] == "reduce/0")
    browser.execute_script("showTask(arguments[0])", failed_reduce["id"])
    wait_until(lambda: "ImpossibleDependency" in text(browser, "detail-body"), 30,
               "the reduce's ImpossibleDependency")
    links = browser.find_elements(By.CSS_SELECTOR, "#detail-body a.task-link[data-id]")
    assert failed_map["id"] in [a.get_attribute("data-id") for a in links]

    # The graph of the final task: every task, failures coloured.
    final = next(r for r in records if r["label"] == "final")
    browser.get(cluster.base + "#graph")
    browser.execute_script("drawGraph(arguments[0])", final["id"])
    wait_until(lambda: "221 tasks" in text(browser, "graph-note"), 30, "the whole graph drawn")
    assert "%d failed" % failed in text(browser, "graph-note")
    shoot(browser, "dashboard-graph.png", tmp_path)

    # The engines page.
    browser.get(cluster.base + "#engines")
    wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#engine-table tbody tr")) == 2, 30,
               "two engines listed")

    errors = console_errors(browser)
    assert not errors, errors


def test_a_page_without_the_token_is_refused(make_cluster, browser):
    cluster = make_cluster(engines=1, dashboard="0.0.0.0:0")
    assert "token=" in cluster.url
    browser.get(cluster.base)
    assert "403" in browser.find_element(By.TAG_NAME, "body").text
    browser.get(cluster.url)
    wait_until(lambda: "live" in text(browser, "status"), 30, "the page going live with its token")
    # The cookie the token set lets the page's own requests through.
    browser.get(cluster.base + "#engines")
    wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#engine-table tbody tr")) == 1, 30,
               "the engine listed")
